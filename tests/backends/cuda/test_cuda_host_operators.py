"""Every (operator, signature) the CUDA backend advertises, run through the backend on the stand-in driver
(cuda_driver_fake.py) with its kernels' CUDA C compiled for the host (host_kernels.py), agrees with the CPU
reference under the operator suite's rules (tests/support/operator_check.py): so every kernel is checked
numerically without a GPU, and the stand-in's memory checks hold around each of its launches.

The kernels of every advertised pair are compiled before the first test, on all cores, into a cache that
later runs and other pytest workers share. Without a host C++ compiler the module is one skip.
"""

from __future__ import annotations

import pytest

pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings is installed with the [cuda] extra")

import host_kernels

if host_kernels.compiler() is None:
    pytest.skip(host_kernels.NO_COMPILER, allow_module_level=True)

from cuda_driver_fake import stand_in

import operator_cases
from ironaccel.backends.cuda import plan
from ironaccel.backends.cuda.capability import descriptor
from operator_check import advertised, check_against_reference, signature_id

PAIRS = advertised(descriptor())


@pytest.fixture(scope="module")
def device():
    """The CUDA backend opened on the stand-in, with every advertised pair's kernels built for the host."""
    if host_kernels.compiler() is None:
        pytest.skip(host_kernels.NO_COMPILER)
    sources = [k.source for op, sig in PAIRS for k in plan.build(operator_cases.case(op, sig).program).kernels]
    host_kernels.build(sources)  # a refused source fails its pairs' tests, with the compiler's message
    with stand_in() as opened:
        yield opened


@pytest.mark.parametrize(("op", "signature"), PAIRS, ids=[f"{op.name}-{signature_id(s)}" for op, s in PAIRS])
def test_the_advertised_pair_runs_as_the_reference(device, op, signature):
    dev, driver = device
    case = operator_cases.case(op, signature)
    launched = len(driver.launches)
    check_against_reference(dev, op, signature, case, "cuda", "cuda (host kernels)")
    kernels = plan.build(case.program).kernels
    assert {k.name for k in kernels} <= set(driver.launches[launched:]), "a planned kernel never ran"


def test_the_pairs_cover_the_elementwise_kernels():
    assert len(PAIRS) > 60
    names = {k.name for op, sig in PAIRS for k in plan.build(operator_cases.case(op, sig).program).kernels}
    bases = {name.rsplit("_v", 1)[0] if "_v" in name else name for name in names}  # contiguous variants
    assert {"ia_add_fp32", "ia_mul_int32", "ia_cast_fp32_bf16", "ia_clamp_fp16"} <= bases
