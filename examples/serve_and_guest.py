"""Serve the CPU backend to guests over a Unix socket, then use it as a guest would.

    python examples/serve_and_guest.py

The daemon runs on a thread of this process (``ironaccel serve`` runs the same daemon as a process of its
own). The guest opens it as ``ironaccel.open("virtio:PATH")`` and runs the bundled CNN through it; the
same program also runs on the local CPU backend, and the two outputs must agree bit for bit (the daemon
serves that very backend). The daemon is stopped at the end and the socket file is gone.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from importlib import resources

import numpy as np

import ironaccel as ia
from ironaccel.backends.cpu.accelerator import CpuAccelerator
from ironaccel.virtio import DeviceEngine
from ironaccel.virtio.daemon import for_engine


def main() -> int:
    model = resources.files("ironaccel").joinpath("models", "cnn_fp32.tosa").read_bytes()
    with tempfile.TemporaryDirectory() as folder:
        socket_path = os.path.join(folder, "accel.sock")
        daemon = for_engine(socket_path, DeviceEngine(CpuAccelerator()))
        daemon.listen()  # the socket exists once this returns: a guest may connect at once
        serving = threading.Thread(target=daemon.serve, name="virtio-accel daemon")
        serving.start()
        try:
            with ia.open(f"virtio:{socket_path}") as guest, ia.open("cpu") as local:
                print(f"guest device: {guest.info.name}")
                remote_exe, local_exe = guest.compile(model), local.compile(model)
                rng = np.random.default_rng(0)
                x = rng.standard_normal(remote_exe.inputs[0].shape).astype(np.float32)
                (y_guest,) = remote_exe(x)
                (y_local,) = local_exe(x)
                print(f"through the daemon: {np.array2string(y_guest.ravel()[:4], precision=4)}")
                print(f"local CPU:          {np.array2string(y_local.ravel()[:4], precision=4)}")
                agree = np.array_equal(y_guest, y_local)
                print(f"outputs agree: {'yes, bit for bit' if agree else 'NO'}")
        finally:
            daemon.stop()
            serving.join(30)
        print(f"daemon stopped: {not serving.is_alive()}, socket removed: {not os.path.exists(socket_path)}")
        return 0 if agree and not serving.is_alive() else 1


if __name__ == "__main__":
    sys.exit(main())
