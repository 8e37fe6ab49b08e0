"""Every accelerator of a Ray cluster as one pool (``pip install "ironaccel[ray]"``).

- :func:`node_resources` / :func:`node_labels` / :func:`ray_start_args`: what a node advertises to Ray, from
  its own discovery (``python -m ironaccel.cluster`` prints the ``ray start`` options);
- :class:`Pool`: replicas of one compiled program, one per device (or share of one), fed by ``pool.map``,
  replaced when they fail (up to ``max_replacements``);
- :class:`IronAccelPredictor`: the same for Ray Data's ``map_batches``.

Only :class:`Pool` and :class:`IronAccelPredictor` need Ray itself; the node's resources and labels come
from IronAccel's discovery alone.
"""

from __future__ import annotations

from .data import IronAccelPredictor
from .failures import PoolExhausted, ReplicaFailed, ReplicaFailure
from .pool import PER_DEVICE, Pool, plan
from .replica import Replica, ReplicaLost
from .resources import (
    LABEL_PREFIX,
    PREFIX,
    NodeDevice,
    advertised,
    node_devices,
    node_labels,
    node_resources,
    ray_start_args,
    resource_name,
)

__all__ = [
    "LABEL_PREFIX",
    "PER_DEVICE",
    "PREFIX",
    "IronAccelPredictor",
    "NodeDevice",
    "Pool",
    "PoolExhausted",
    "Replica",
    "ReplicaFailed",
    "ReplicaFailure",
    "ReplicaLost",
    "advertised",
    "node_devices",
    "node_labels",
    "node_resources",
    "plan",
    "ray_start_args",
    "resource_name",
]
