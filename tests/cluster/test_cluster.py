"""ironaccel.cluster on a three-node local Ray cluster: each node advertises different device resources (the
head ironaccel_cpu only, one node a Vulkan device as well, which lavapipe runs here, and one node more CPU
replicas); pools are placed by those resources, map every input to exactly one output in order, survive a
replica killed, a device lost or a node lost mid-map by starting replacements (within their bound), and
give every resource back when closed.

Ray is kept small: one CPU and an 80 MB object store per node, no dashboard, and every address on the
loopback interface."""

from __future__ import annotations

import os
import time
import warnings
from collections import Counter
from importlib import resources

# Ray decides at import whether nodes bind the host's address or the loopback: these tests use the loopback.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="ray is not installed: pip install 'ironaccel[ray]'")
cluster_utils = pytest.importorskip("ray.cluster_utils")

import ironaccel  # noqa: E402
from ironaccel.cluster import (  # noqa: E402
    IronAccelPredictor,
    Pool,
    PoolExhausted,
    ReplicaFailed,
    node_labels,
    node_resources,
    plan,
    ray_start_args,
)
from ironaccel.core.errors import InvalidArgument, Unsupported  # noqa: E402
from ironaccel.tosa import ProgramBuilder  # noqa: E402

MODEL = str(resources.files("ironaccel").joinpath("models", "cnn_fp32.tosa"))
NODE = {"num_cpus": 1, "object_store_memory": 80 * 2**20}
# A node whose raylet is gone is declared dead after three missed health checks a second apart (Ray's
# default takes about 15 s); a raylet that is merely slow still has ten seconds to answer each check.
HEALTH = {"health_check_period_ms": 1000, "health_check_failure_threshold": 3}
# The Vulkan node's replica runs on lavapipe: its sums may round differently from the CPU backend's.
ATOL = 1e-5


def _vulkan_runs_here() -> bool:
    try:
        with ironaccel.open("vulkan"):
            return True
    except Exception:  # noqa: BLE001 - any failure means no Vulkan replica in these tests
        return False


VULKAN = _vulkan_runs_here()


@pytest.fixture(scope="module")
def cluster():
    """head: ironaccel_cpu 1; "vulkan" node: ironaccel_cpu 1 and ironaccel_vulkan 1; "wide" node: ironaccel_cpu 2,
    labelled ironaccel/role=wide."""
    made = cluster_utils.Cluster(
        initialize_head=True,
        connect=False,
        head_node_args={
            **NODE,
            "include_dashboard": False,
            "resources": {"ironaccel_cpu": 1},
            "_system_config": HEALTH,
        },
    )
    gpu = {"ironaccel_vulkan": 1} if VULKAN else {}
    vulkan_node = made.add_node(**NODE, resources={"ironaccel_cpu": 1, **gpu})
    wide_node = made.add_node(**NODE, resources={"ironaccel_cpu": 2}, labels={"ironaccel/role": "wide"})
    ray.init(address=made.address, log_to_driver=False)
    made.wait_for_nodes()
    made.nodes = {"vulkan": vulkan_node.node_id, "wide": wide_node.node_id, "head": made.head_node.node_id}
    try:
        yield made
    finally:
        ray.shutdown()
        made.shutdown()


@pytest.fixture(scope="module")
def inputs():
    rng = np.random.default_rng(7)
    return [rng.standard_normal((1, 3, 32, 32)).astype(np.float32) for _ in range(200)]


@pytest.fixture(scope="module")
def expected(inputs):
    with ironaccel.open("cpu") as dev:
        exe = dev.compile(MODEL)
        return [exe(x)[0] for x in inputs]


def _same(got, expected):
    assert len(got) == len(expected)
    for n, (outputs, want) in enumerate(zip(got, expected, strict=True)):
        assert len(outputs) == 1, n
        np.testing.assert_allclose(outputs[0], want, rtol=0, atol=ATOL, err_msg=f"input {n}")


def _plus_one(n: int = 4):
    b = ProgramBuilder()
    x = b.input("x", (n,), "fp32")
    b.output(b.add(x, np.ones(n, np.float32)))
    return b.build()


def _settled(timeout: float = 30.0) -> dict[str, float]:
    """The ironaccel_* resources available once every replica's exit has reached the scheduler."""
    total = {k: v for k, v in ray.cluster_resources().items() if k.startswith("ironaccel_")}
    deadline = time.monotonic() + timeout
    while True:
        free = {k: v for k, v in ray.available_resources().items() if k.startswith("ironaccel_")}
        if free == total or time.monotonic() > deadline:
            return free
        time.sleep(0.1)


# ---- what a node advertises (discovery only, no cluster) -------------------------------------------------


def test_node_resources_and_labels_come_from_discovery():
    from ray._private.label_utils import parse_node_labels_string, validate_label_key, validate_label_value

    cores = len(os.sched_getaffinity(0))
    assert node_resources() == {"ironaccel_cpu": float(cores)}  # lavapipe is a software device: left out
    assert node_resources(cpu_replicas=3)["ironaccel_cpu"] == 3.0
    labels = node_labels(include_software=True)
    assert labels["ironaccel/cpu-0-tier"]
    if VULKAN:
        assert node_resources(include_software=True)["ironaccel_vulkan"] == 1.0
        assert labels["ironaccel/vulkan-0-software"] == "lavapipe"
    for key, value in labels.items():
        assert validate_label_key(key) is None, key
        validate_label_value(value)
    resources_arg, labels_arg = ray_start_args()
    assert resources_arg.startswith("--resources={") and labels_arg.startswith("--labels=ironaccel/backends=")
    assert parse_node_labels_string(labels_arg.removeprefix("--labels="))["ironaccel/cpu-0-tier"]  # as ray start


def test_plan_places_replicas_by_advertised_resources():
    offered = {"CPU": 3.0, "ironaccel_cpu": 4.0, "ironaccel_vulkan": 1.0}
    assert plan("auto", 2, 1.0, offered) == [("vulkan", "vulkan"), ("cpu", "cpu")]
    assert plan("auto", "per-device", 1.0, offered) == [("vulkan", "vulkan")] + [("cpu", "cpu")] * 4
    assert plan("vulkan:lavapipe", "per-device", 0.5, offered) == [("vulkan", "vulkan:lavapipe")] * 2
    with pytest.raises(InvalidArgument, match="do not fit"):
        plan("cpu", 5, 1.0, offered)
    with pytest.raises(Unsupported, match="ironaccel_cuda"):
        plan("cuda", 1, 1.0, offered)
    with pytest.raises(InvalidArgument):
        plan("virtio:/run/accel.sock", 1, 1.0, offered)


# ---- pools on the three-node cluster --------------------------------------------------------------------


def test_replicas_are_placed_by_resource_and_map_yields_every_output_once_in_order(cluster, inputs, expected):
    with Pool(MODEL, device="auto", replicas="per-device") as pool:
        backends = Counter(r["backend"] for r in pool.live)
        assert backends == Counter({"cpu": 4, **({"vulkan": 1} if VULKAN else {})})
        cpu = [r for r in pool.live if r["backend"] == "cpu"]
        nodes = Counter(r["node"] for r in cpu)
        assert nodes == Counter({cluster.nodes["head"]: 1, cluster.nodes["vulkan"]: 1, cluster.nodes["wide"]: 2})
        assert all(r["device"] == "cpu:0" and len(r["affinity"]) == 1 for r in cpu)
        # The wide node's two replicas hold a core each.
        wide = [r["affinity"][0] for r in cpu if r["node"] == cluster.nodes["wide"]]
        assert len(set(wide)) == min(2, len(os.sched_getaffinity(0)))
        for replica in pool.live:
            if replica["backend"] == "vulkan":
                assert replica["node"] == cluster.nodes["vulkan"] and replica["device"].startswith("vulkan:")
        _same(list(pool.map(inputs, max_in_flight=6)), expected)
        _same(list(pool.map(inputs, batch_size=16)), expected)
        assert sum(s["items"] for s in pool.stats()) == 2 * len(inputs)
        assert not pool.failures
    assert _settled() == {k: v for k, v in ray.cluster_resources().items() if k.startswith("ironaccel_")}


def test_a_label_selector_keeps_replicas_to_matching_nodes_and_unordered_map_yields_each_once(cluster):
    xs = [np.full(4, i, np.float32) for i in range(100)]
    with Pool(_plus_one(), device="cpu", replicas=2, label_selector={"ironaccel/role": "wide"}) as pool:
        assert {r["node"] for r in pool.live} == {cluster.nodes["wide"]}
        seen = sorted(int(out[0][0]) - 1 for out in pool.map(xs, ordered=False, max_in_flight=4))
    assert seen == list(range(100))


def test_a_replica_killed_mid_map_loses_nothing_and_is_replaced(cluster, inputs, expected):
    with Pool(MODEL, device="cpu", replicas=3) as pool:
        victim = pool.actors[1]
        got = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            stream = pool.map(inputs, max_in_flight=6)
            for _ in range(30):
                got.append(next(stream))
            ray.kill(victim)
            got.extend(stream)
        _same(got, expected)
        [failure] = pool.failures
        assert failure.replica == 1 and "killed" in failure.reason and failure.replacement == 3
        assert len(failure.retried_inputs) == failure.retried
        assert all(30 <= p < len(inputs) for p in failure.retried_inputs)
        assert [r["replica"] for r in pool.wait_for_replacements()] == [0, 2, 3]
        assert failure.replacement_status == "running"
        assert any(issubclass(w.category, ReplicaFailed) for w in caught)


def test_a_lost_device_is_not_handed_to_its_replacement(cluster, inputs, expected):
    with Pool(MODEL, device="cpu", replicas=2) as pool:
        lost = pool.live[0]
        ray.get(pool.actors[0].lose_device.remote("the driver was reset"))
        with pytest.warns(ReplicaFailed, match="device lost"):
            got = list(pool.map(inputs[:40]))
        _same(got, expected[:40])
        [failure] = pool.failures
        assert failure.replica == 0 and "the driver was reset" in failure.reason and failure.retried >= 1
        live = pool.wait_for_replacements()
        assert [r["replica"] for r in live] == [1, 2] and failure.replacement == 2
        # The failed replica keeps its Ray resource and its core's slot until the pool closes, so its
        # replacement runs on another node or another core, never on the lost one.
        assert (live[1]["node"], live[1]["affinity"]) != (lost["node"], lost["affinity"])
        _same(list(pool.map(inputs[:8])), expected[:8])
        released = pool.close()
    assert set(released) == {0, 1, 2} and not any(v for left in released.values() for v in left.values())


def test_replacements_are_bounded_and_an_empty_pool_names_what_is_not_done(cluster):
    xs = [np.full(4, i, np.float32) for i in range(60)]
    with Pool(_plus_one(), device="cpu", replicas=2, max_replacements=1) as pool:
        for actor in pool.actors:
            ray.kill(actor)
        with pytest.warns(ReplicaFailed):
            got = [int(out[0][0]) - 1 for out in pool.map(xs[:30], max_in_flight=4)]
        assert got == list(range(30))
        first, second = sorted(pool.failures, key=lambda f: f.replacement is None)
        assert {first.replica, second.replica} == {0, 1}
        assert first.replacement == 2 and first.replacement_status == "running"
        assert second.replacement is None and "max_replacements=1" in second.replacement_status
        assert [r["replica"] for r in pool.live] == [2] and pool.replacements == 1
        # The bound is spent: when the last replica goes, map says what did and did not finish.
        ray.kill(pool.actors[0])
        yielded = []
        with pytest.warns(ReplicaFailed), pytest.raises(PoolExhausted, match="no replica of the pool is left") as info:
            for out in pool.map(xs, max_in_flight=4):
                yielded.append(int(out[0][0]) - 1)
    error = info.value
    assert [f.replica for f in error.failures] == [f.replica for f in pool.failures] and len(error.failures) == 3
    assert yielded == list(range(len(yielded))) and 0 < error.not_taken_from <= len(xs)
    assert not set(yielded) & set(error.not_done)
    assert sorted([*yielded, *error.not_done]) == list(range(error.not_taken_from))
    assert "not done" in str(error) and "replica 2" in str(error)


def test_a_replacement_with_no_room_is_given_up_and_the_map_goes_on(cluster):
    # Both of the wide node's slots are the pool's, and a replica that lost its device keeps its slot: its
    # replacement has nowhere to go.
    xs = [np.full(4, i, np.float32) for i in range(60)]

    def paced():
        for x in xs:
            time.sleep(0.03)  # the map outlasts replace_timeout
            yield x

    wide = {"ironaccel/role": "wide"}
    with Pool(_plus_one(), device="cpu", replicas=2, label_selector=wide, replace_timeout=1.0) as pool:
        ray.get(pool.actors[0].lose_device.remote())
        with pytest.warns(ReplicaFailed) as caught:
            got = [int(out[0][0]) - 1 for out in pool.map(paced(), max_in_flight=2)]
        assert any("could be placed and ready within 1 s" in str(w.message) for w in caught)
        assert got == list(range(60))
        [failure] = pool.failures
        assert failure.replacement == 2 and failure.replacement_status.startswith("not placed and ready within 1 s")
        assert [r["replica"] for r in pool.live] == [1]


def test_closing_gives_every_resource_back(cluster):
    pools = [Pool(MODEL, device="cpu", replicas=2), Pool(_plus_one(), device="auto", replicas=1)]
    assert _settled(timeout=0) != {k: v for k, v in ray.cluster_resources().items() if k.startswith("ironaccel_")}
    for pool in pools:
        live = {r["replica"] for r in pool.live}
        released = pool.close()
        assert pool.close() is released
        # Each replica's device holds nothing once closed: no context, queue, program or buffer left.
        assert set(released) == live and all(not any(left.values()) for left in released.values()), released
    assert _settled() == {k: v for k, v in ray.cluster_resources().items() if k.startswith("ironaccel_")}


def test_a_node_lost_mid_map_is_replaced_on_a_surviving_node(cluster):
    spare = cluster.add_node(**NODE, resources={"ironaccel_cpu": 1}, labels={"ironaccel/role": "spare"})
    cluster.wait_for_nodes()
    wide = cluster.nodes["wide"]
    both = {"ironaccel/role": "in(wide,spare)"}
    # One of the wide node's two slots is held while the pool starts, so its two replicas take one slot on
    # each node; once released, that slot is where a replacement can go.
    with Pool(_plus_one(), device="cpu", replicas=1, label_selector={"ironaccel/role": "wide"}):
        pool = Pool(_plus_one(), device="cpu", replicas=2, label_selector=both)
    xs = [np.full(4, i, np.float32) for i in range(3000)]
    running_at: list[int] = []

    def feed():
        for i, x in enumerate(xs):
            if i == 20:
                cluster.remove_node(spare, allow_graceful=False)
            elif i > 20:
                # Paced, so that the map is still going when the replacement is up; it ends 40 inputs later.
                time.sleep(0.005)
                if not running_at and pool.failures and pool.failures[0].replacement_status == "running":
                    running_at.append(i)
                if running_at and i >= running_at[0] + 40:
                    return
            yield x

    with pool:
        lost = next(r["replica"] for r in pool.live if r["node"] == spare.node_id)
        assert {r["node"] for r in pool.live} == {wide, spare.node_id}
        with pytest.warns(ReplicaFailed):
            got = [int(out[0][0]) - 1 for out in pool.map(feed(), max_in_flight=4)]
        assert running_at, pool.failures
        assert got == list(range(len(got)))
        [failure] = pool.failures
        assert failure.replica == lost and failure.node == spare.node_id and failure.replacement == 2
        assert {r["replica"]: r["node"] for r in pool.live} == {1 - lost: wide, 2: wide}
        assert {s["replica"]: s["items"] > 0 for s in pool.stats()} == {1 - lost: True, 2: True}
        released = pool.close()
    assert set(released) == {1 - lost, 2} and all(not any(left.values()) for left in released.values())


def test_the_predictor_runs_each_row_of_a_batch(inputs, expected):
    # threads=None: not pinned to one core, which would pin the test process itself.
    predictor = IronAccelPredictor(
        MODEL, device="cpu", input_columns=["image"], output_columns=["logits"], threads=None
    )
    batch = {"image": np.stack([x[0] for x in inputs[:8]])}
    out = predictor(batch)
    assert out["logits"].shape == (8, 10)
    np.testing.assert_allclose(out["logits"], np.concatenate(expected[:8]), rtol=0, atol=0)
    with pytest.raises(InvalidArgument, match="no column"):
        predictor({"other": batch["image"]})
