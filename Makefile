# make demo  - list devices and run the bundled program (bootstraps everything it needs)
# make test  - lint, check the wheel (scripts/wheel-check) and run the test suite
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
TOSA_VENV ?= .venv-tosa
PY := $(VENV)/bin/python
# cuda: cuda-bindings and NVRTC, with which the tests compile every CUDA kernel, also where no GPU is.
# ray: Ray core, Data and Serve for ironaccel.cluster (tests/cluster, examples/ray_*.py).
EXTRAS ?= test,vulkan,webgpu,cuda,ray

.PHONY: all demo test lint wheel-check system-deps venv tosa-tools gpu-check clean conformance

all: test

system-deps:
	@scripts/install-system-deps

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[$(EXTRAS)]"
	touch $@

venv: $(VENV)/.installed

# tosa-tools pins old numpy/flatbuffers: it lives in its own environment as a test tool only.
$(TOSA_VENV)/.installed:
	$(PYTHON) -m venv $(TOSA_VENV)
	$(TOSA_VENV)/bin/python -m pip install -q --upgrade pip
	$(TOSA_VENV)/bin/python -m pip install -q "tosa-tools==2026.8.0"
	# Arm's runner imports our system under test; to judge the Vulkan backend it needs the binding too.
	$(TOSA_VENV)/bin/python -m pip install -q "vulkan>=1.3.275" "cffi>=1.16"
	touch $@

tosa-tools: $(TOSA_VENV)/.installed

# PyTorch's front door (ironaccel.torch, `ironaccel export`, tests/torch) and `make models`: the package with its
# torch extra, whose tosa-tools pins numpy and flatbuffers, in an environment of its own.
EXPORT_VENV ?= .venv-export
$(EXPORT_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(EXPORT_VENV)
	$(EXPORT_VENV)/bin/python -m pip install -q --upgrade pip
	$(EXPORT_VENV)/bin/python -m pip install -q -e ".[torch]" "pytest>=8" "transformers==5.23.0"
	touch $@

.PHONY: export-env
export-env: $(EXPORT_VENV)/.installed

# ONNX's front door (ironaccel.onnx, tests/onnx, ADR 0046): torch-mlir's importer, onnx, onnxruntime and tosa-opt
# in .venv-onnx, out of the other environments' pins. `make test` builds it, so tests/onnx run there (they skip
# only where it is absent).
.PHONY: onnx-env
onnx-env:
	PYTHON=$(PYTHON) scripts/onnx-env

# ruff, then the size of every hand-written module under src/ (at most 500 lines: scripts/check-module-size).
lint: venv
	$(VENV)/bin/ruff check src tests examples $(wildcard benchmarks) scripts/operators-doc scripts/check-module-size
	$(PY) scripts/check-module-size

# A wheel built from this tree, installed in a new virtual environment under .cache/wheel-check, runs
# `ironaccel demo` on the native CPU path: fails on a file missing from the wheel or any fallback.
wheel-check: system-deps venv
	VENV=$(VENV) PYTHON=$(PYTHON) scripts/wheel-check

# One pytest worker per core (pytest-xdist): most tests are single-threaded. On two cores with empty
# caches the suite took 1772 s this way against 2149 s serially (with fewer tests); what remains is
# mostly the conformance-suite generations, which a worker waits on.
TEST_WORKERS ?= auto
# The Khronos validation layer, with its synchronization validation (every barrier the recordings place is
# checked for read/write hazards); the tests fail on any message it reports.
VK_VALIDATION = VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation \
	VK_LAYER_ENABLES=VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT

# tests/torch need torch and ExecuTorch: the first run leaves them out, the second runs them in $(EXPORT_VENV).
test: system-deps venv tosa-tools export-env onnx-env lint wheel-check
	$(VK_VALIDATION) $(PY) -m pytest -q -m "not gpu and not slow" -n $(TEST_WORKERS) \
		--durations=25
	$(EXPORT_VENV)/bin/python -m pytest -q -m "not gpu and not slow" tests/torch

demo: system-deps venv
	$(VENV)/bin/ironaccel demo

gpu-check:
	scripts/gpu-check

clean:
	rm -rf $(VENV) $(TOSA_VENV) .venv-export .venv-onnx build .pytest_cache .cache/wheel-check

# make conformance - Arm's whole TOSA 1.0.2 suite (PRO-INT, PRO-FP, every 1.0 extension) on DEVICE (default cpu);
# the suite is generated once into .cache/cts; the report lands in conformance-report/
.PHONY: conformance
conformance: venv tosa-tools
	$(VENV)/bin/ironaccel conformance --device $${DEVICE:-cpu} --cache .cache/cts --report conformance-report

# make conformance-vulkan-int - every PRO-INT test (with EXT-DOUBLEROUND / EXT-INEXACTROUND) that the Vulkan
# integer tier advertises, on lavapipe under the validation layer; report in conformance-report/vulkan-int/
.PHONY: conformance-vulkan-int
conformance-vulkan-int: venv tosa-tools
	$(VK_VALIDATION) $(VENV)/bin/ironaccel conformance --device $${DEVICE:-vulkan:lavapipe} \
		--profile pro-int --cache .cache/cts --report conformance-report/vulkan-int

# make conformance-vulkan-float - every PRO-FP test with the BF16 and FP8 extensions that the Vulkan float
# tiers advertise, on lavapipe under the validation layer; report in conformance-report/vulkan-float/
.PHONY: conformance-vulkan-float
conformance-vulkan-float: venv tosa-tools
	$(VK_VALIDATION) $(VENV)/bin/ironaccel conformance --device $${DEVICE:-vulkan:lavapipe} \
		--profile pro-fp --extension bf16 --extension fp8e4m3 --extension fp8e5m2 --cache .cache/cts \
		--report conformance-report/vulkan-float

# make cts-bundle - pack the conformance subsets that scripts/gpu-check runs on a GPU machine without tosa-tools
# (ADR 0013): the 3 smallest tests of every operator x output type x polarity of PRO-FP with BF16 / FP8 and of
# PRO-INT, into .cache/cts-bundle/{fp,int}; judge what comes back with
# `ironaccel conformance --judge RESULTS --report DIR`
.PHONY: cts-bundle
cts-bundle: venv tosa-tools
	rm -rf .cache/cts-bundle
	$(VENV)/bin/ironaccel conformance --device vulkan:lavapipe --profile pro-fp --extension bf16 --extension fp8e4m3 \
		--extension fp8e5m2 --smallest 3 --cache .cache/cts --pack .cache/cts-bundle/fp
	$(VENV)/bin/ironaccel conformance --device vulkan:lavapipe --profile pro-int --smallest 3 --cache .cache/cts \
		--pack .cache/cts-bundle/int

# make fuzz-tosa - fuzz the .tosa reader with IRONACCEL_FUZZ_EXAMPLES inputs (default 200000; minutes)
.PHONY: fuzz-tosa
fuzz-tosa: venv
	IRONACCEL_FUZZ_EXAMPLES=$${IRONACCEL_FUZZ_EXAMPLES:-200000} $(PY) -m pytest -q -s -m slow tests/tosa/test_tosa_fuzz.py

# make fuzz-virtio - fuzz the virtio-accel frame decoders, the chain walker and ring indices, hostile guest sessions
# against the device engine and over the daemon's socket (IRONACCEL_FUZZ_EXAMPLES inputs per target, default 10^6;
# the socket sessions stop after IRONACCEL_FUZZ_SECONDS, default 600)
.PHONY: fuzz-virtio
fuzz-virtio: venv
	IRONACCEL_FUZZ_EXAMPLES=$${IRONACCEL_FUZZ_EXAMPLES:-1000000} $(PY) -m pytest -q -s -m slow tests/virtio/test_virtio_wire_fuzz.py \
		tests/virtio/test_virtio_engine_fuzz.py tests/virtio/test_virtio_ring_fuzz.py tests/virtio/test_virtio_session_fuzz.py

# make fuzz-programs - valid hostile programs (nested control flow, endless loops, gigabyte TILEs) through a
# daemon with tight quotas: IRONACCEL_FUZZ_EXAMPLES guests (default 50000, about 10^5 programs; hours)
.PHONY: fuzz-programs
fuzz-programs: venv
	IRONACCEL_FUZZ_EXAMPLES=$${IRONACCEL_FUZZ_EXAMPLES:-50000} $(PY) -m pytest -q -s tests/virtio/test_virtio_program_fuzz.py

# make models - re-export the bundled programs from PyTorch through ironaccel.torch (in $(EXPORT_VENV))
.PHONY: models
models: $(EXPORT_VENV)/.installed
	$(EXPORT_VENV)/bin/python examples/export_models.py src/ironaccel/models

# make bench - time the CPU backend against onnxruntime, IREE (llvm-cpu), torch eager and the TOSA reference
# model on the same programs (about 2 minutes); rewrites the current table, benchmarks/results/cpu.md (and .json).
# BENCH_ARGS passes options through, e.g. BENCH_ARGS="--workloads conv,matmul --seconds 2".
# This workplace sets OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE for old OpenBLAS builds; they hold numpy's
# current OpenBLAS to AVX2 kernels, so the benchmark runs without them (the report names the kernel used).
.PHONY: bench
BENCH_VENV ?= .venv-bench
$(BENCH_VENV)/.installed: pyproject.toml benchmarks/requirements.txt
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install -q --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install -q -e . -r benchmarks/requirements.txt
	touch $@

bench: $(BENCH_VENV)/.installed tosa-tools
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(BENCH_VENV)/bin/python benchmarks/bench_cpu.py $(BENCH_ARGS)

# make models-zoo - whole models (MobileNetV2, ResNet-50, ViT-B/16, BERT-base and a Llama-style decoder layer; random
# weights from a fixed seed; fp32 and int8) on the CPU backend against onnxruntime, IREE (llvm-cpu) and torch eager
# (minutes; exports are kept in .cache/models); rewrites benchmarks/models/results.md (and .json, cpu.png), keeping
# the rows of models it did not run. ZOO_ARGS passes options, e.g. ZOO_ARGS="--models bert_base --no-int8".
# It runs in $(EXPORT_VENV), where the peers install under benchmarks/requirements.txt's pins; onnx does not (its
# ml_dtypes clashes with tosa-tools' pin there), so the ONNX export runs in $(BENCH_VENV).
.PHONY: models-zoo
$(EXPORT_VENV)/.zoo-installed: $(EXPORT_VENV)/.installed benchmarks/requirements.txt
	$(EXPORT_VENV)/bin/python -m pip install -q -c benchmarks/requirements.txt torchvision transformers onnxruntime \
		iree-base-compiler iree-base-runtime threadpoolctl "matplotlib==3.11.2"
	touch $@

models-zoo: $(EXPORT_VENV)/.zoo-installed $(BENCH_VENV)/.installed tosa-tools
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(EXPORT_VENV)/bin/python benchmarks/models/zoo.py $(ZOO_ARGS)
