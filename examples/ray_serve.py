"""Serving a program over HTTP with Ray Serve, requests batched dynamically (@serve.batch).

    python examples/ray_serve.py                 # serve the bundled CNN on http://127.0.0.1:8000/classify
    python examples/ray_serve.py --check 24      # ...then send 24 concurrent requests, compare, and stop

A request is JSON, {"image": [[[...]]]} (3 x 32 x 32 numbers); the answer is {"logits": [...10 numbers]}.
Each replica of the deployment opens its device once and compiles once (ironaccel.cluster.Replica); Serve
gathers requests that arrive together into one batch of up to 8, which the replica runs back to back.
"""

from __future__ import annotations

import argparse
import json
import socket
import threading
import urllib.request
from importlib import resources
from typing import Any

import numpy as np

from ironaccel.cluster import Replica, node_resources
from ironaccel.cluster.replica import pack_program

MAX_BATCH = 8


class Classifier:
    """What a deployment replica does, without HTTP: a batch of images in, one row of logits per image."""

    def __init__(self, program: Any, device: str = "cpu", threads: int | None = 1) -> None:
        self.replica = Replica(*pack_program(program), device, threads)
        self.input = self.replica.executable.inputs[0]
        self.batches: list[int] = []  # the size of each batch run, to show the batching

    def predict_batch(self, images: list[np.ndarray]) -> list[np.ndarray]:
        self.batches.append(len(images))
        items = [np.asarray(image, self.input.numpy_dtype).reshape(self.input.shape) for image in images]
        return [outputs[0][0] for outputs in self.replica.run(items)]


def deployment(program: bytes, device: str = "cpu") -> Any:
    """The Serve application: one replica per ironaccel_<backend> unit it is given."""
    from ray import serve
    from starlette.requests import Request

    backend = device.partition(":")[0]

    @serve.deployment(ray_actor_options={"num_cpus": 0, "resources": {f"ironaccel_{backend}": 1}})
    class Served:
        def __init__(self) -> None:
            self.logic = Classifier(program, device)

        @serve.batch(max_batch_size=MAX_BATCH, batch_wait_timeout_s=0.01)
        async def predict(self, images: list[np.ndarray]) -> list[np.ndarray]:
            return self.logic.predict_batch(images)

        async def __call__(self, request: Request) -> dict[str, Any]:
            body = await request.json()
            logits = await self.predict(np.asarray(body["image"], np.float32))
            return {"logits": logits.tolist()}

        def batch_sizes(self) -> list[int]:
            return self.logic.batches

    return Served.bind()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(url: str, image: np.ndarray) -> np.ndarray:
    request = urllib.request.Request(
        url, json.dumps({"image": image.tolist()}).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        return np.asarray(json.load(answer)["logits"], np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", type=int, metavar="N", help="send N concurrent requests, compare, then stop")
    parser.add_argument("--port", type=int, default=None, help="HTTP port (default 8000; --check: a free one)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    import ray
    from ray import serve

    # One machine, every Ray process on the loopback interface.
    ray.init(
        address="local",  # a Ray of its own, even where another runs on this machine
        num_cpus=2,
        resources=node_resources(cpu_replicas=2),
        include_dashboard=False,
        object_store_memory=100 * 2**20,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
    )
    port = args.port or (_free_port() if args.check else 8000)
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    program = resources.files("ironaccel").joinpath("models", "cnn_fp32.tosa").read_bytes()
    handle = serve.run(deployment(program, args.device), name="classify", route_prefix="/classify")
    url = f"http://127.0.0.1:{port}/classify"
    print(f"serving the bundled CNN at {url}")
    if not args.check:
        threading.Event().wait()  # until Ctrl-C
        return

    images = np.random.default_rng(0).standard_normal((args.check, 3, 32, 32)).astype(np.float32)
    local = Classifier(program, "cpu", threads=None)  # this process keeps its cores
    want = local.predict_batch(list(images))
    got: list[Any] = [None] * len(images)

    def ask(i: int) -> None:
        got[i] = _post(url, images[i])

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(images))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    agree = all(g is not None and np.allclose(g, w, rtol=0, atol=1e-5) for g, w in zip(got, want, strict=True))
    sizes = handle.batch_sizes.remote().result()
    print(f"{len(images)} requests in {len(sizes)} batches (largest {max(sizes)})")
    print(f"served outputs agree with the CPU backend: {'yes' if agree else 'NO'}")
    serve.shutdown()
    ray.shutdown()


if __name__ == "__main__":
    main()
