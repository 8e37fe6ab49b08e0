"""``python -m ironaccel.cluster``: the ``ray start`` options that advertise this node's devices.

    ray start --address=HEAD:6379 $(python -m ironaccel.cluster)

``--cpu-replicas N`` sets ``ironaccel_cpu`` (default: one per core), ``--software`` counts software devices
(lavapipe) too, and ``--json`` prints ``{"resources": ..., "labels": ...}`` instead.
"""

from __future__ import annotations

import argparse
import json
import sys

from .resources import node_devices, node_labels, node_resources, ray_start_args, shell_args


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ironaccel.cluster", description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-replicas", type=int, default=None, help="ironaccel_cpu (default: one per core)")
    parser.add_argument("--software", action="store_true", help="count software devices (lavapipe) too")
    parser.add_argument("--json", action="store_true", help="print the resources and labels as JSON")
    args = parser.parse_args(argv)
    if args.json:
        devices = node_devices(args.software)
        document = {
            "resources": node_resources(args.cpu_replicas, args.software, devices),
            "labels": node_labels(devices),
        }
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(shell_args(ray_start_args(args.cpu_replicas, args.software)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
