"""Open a device, compile the bundled CNN, run it on seeded inputs and print what came out.

    python examples/quickstart.py            # "auto": the best non-software device, else the CPU
    python examples/quickstart.py cpu        # or any device spec: vulkan, vulkan:0, virtio:/run/accel.sock

The model is ``cnn_fp32.tosa``, exported from PyTorch and shipped inside the package (ironaccel/models/).
"""

from __future__ import annotations

import sys
from importlib import resources

import numpy as np

import ironaccel as ia


def main(argv: list[str]) -> int:
    spec = argv[1] if len(argv) > 1 else "auto"
    model = resources.files("ironaccel").joinpath("models", "cnn_fp32.tosa")
    with ia.open(spec) as dev, resources.as_file(model) as path:
        print(f"device: {dev.info.name} ({dev.why})")
        exe = dev.compile(path)  # read, validated, admitted against the backend's capabilities, loaded
        print(f"program: {', '.join(map(str, exe.inputs))} -> {', '.join(map(str, exe.outputs))}")
        rng = np.random.default_rng(0)
        inputs = [rng.standard_normal(spec.shape).astype(spec.numpy_dtype) for spec in exe.inputs]
        (y,) = exe(*inputs)
        print(f"output: shape {y.shape}, {y.dtype}, first values {np.array2string(y.ravel()[:4], precision=4)}")
        # The same call, asynchronous and into an array of ours.
        out = np.empty_like(y)
        run = exe.submit(*inputs, out=out)
        run.wait()
        print(f"submit/wait into out=: {'same values' if np.array_equal(out, y) else 'DIFFERENT values'}")
    return 0 if np.array_equal(out, y) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
