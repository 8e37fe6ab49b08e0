"""Batch inference with Ray: the bundled CNN over a dataset, through Ray Data and through a Pool.

    python examples/ray_batch.py [--rows N] [--address HEAD:6379]

Without --address it starts a one-machine Ray instance whose node advertises this host's devices
(ironaccel.cluster.node_resources()); with one it joins a cluster whose nodes were started with
`ray start ... $(python -m ironaccel.cluster)`. Both paths are checked against the CPU backend run here.
"""

from __future__ import annotations

import argparse
from importlib import resources

import numpy as np
import ray

import ironaccel as ia
from ironaccel.cluster import IronAccelPredictor, Pool, node_resources


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--address", default=None, help="a running cluster's address (default: start one here)")
    args = parser.parse_args()

    if args.address:
        ray.init(address=args.address, log_to_driver=False)
    else:
        # One machine: every Ray process on the loopback interface, a small object store.
        advertised = node_resources(cpu_replicas=2)
        ray.init(
            address="local",  # a Ray of its own, even where another runs on this machine
            num_cpus=2,
            resources=advertised,
            include_dashboard=False,
            object_store_memory=100 * 2**20,
            _node_ip_address="127.0.0.1",
            log_to_driver=False,
        )
        print("this node advertises:", advertised)

    model = resources.files("ironaccel").joinpath("models", "cnn_fp32.tosa")
    program = model.read_bytes()  # bytes travel to every node; a path would have to exist on each
    images = np.random.default_rng(0).standard_normal((args.rows, 3, 32, 32)).astype(np.float32)
    with ia.open("cpu") as dev:
        exe = dev.compile(program)
        want = np.concatenate([exe(image[None])[0] for image in images])

    # Ray Data: one predictor per actor, each placed where an ironaccel_cpu unit is free.
    ray.data.DataContext.get_current().enable_progress_bars = False
    # Four blocks, so both predictors get work.
    dataset = ray.data.from_numpy(np.array_split(images, 4)).map_batches(
        IronAccelPredictor,
        fn_constructor_kwargs={"program": program, "device": "cpu", "input_columns": ["data"]},
        concurrency=2,
        resources={"ironaccel_cpu": 1},
        num_cpus=0,
        batch_size=16,
        batch_format="numpy",
    )
    rows = dataset.take_all()
    got = np.stack([row[exe.outputs[0].name] for row in rows])
    # Ray Data may return the rows of different blocks in any order: compare them as sets of rows.
    agree = np.allclose(np.sort(got, axis=0), np.sort(want, axis=0), rtol=0, atol=1e-5)
    print(f"Ray Data: {len(rows)} rows through 2 predictors")
    print(f"Ray Data outputs agree with the CPU backend: {'yes' if agree else 'NO'}")

    # A Pool: ordered results, inputs streamed with at most 4 batches in flight.
    with Pool(program, device="auto", replicas=2) as pool:
        print("pool replicas:", ", ".join(f"{r['device']} on node {r['node'][:8]}" for r in pool.live))
        outputs = [out[0] for out in pool.map((image[None] for image in images), max_in_flight=4, batch_size=8)]
    agree = np.allclose(np.concatenate(outputs), want, rtol=0, atol=1e-5)
    print(f"pool: {len(outputs)} outputs, in order; agree with the CPU backend: {'yes' if agree else 'NO'}")
    ray.shutdown()


if __name__ == "__main__":
    main()
