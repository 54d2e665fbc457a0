"""Two operator replicas share the runs (issue 27, scale-out): each drives the runs of its shard and
no other; every run completes, driven by exactly the replica its shard names."""

from __future__ import annotations

from typing import Any

import pytest

from oasis_operator.core.sharding import shard_of
from oasis_operator.devcluster import kube, stack

pytestmark = pytest.mark.cluster


def two_per_shard(ns: str) -> list[str]:
    """Run names, two for each of the two shards (the namespace is random, so is the spread)."""
    names: dict[int, list[str]] = {0: [], 1: []}
    for i in range(100):
        bucket = names[shard_of(ns, f"shared-{i}", 2)]
        if len(bucket) < 2:
            bucket.append(f"shared-{i}")
    return names[0] + names[1]


def test_each_run_is_driven_by_the_replica_of_its_shard(cluster: Any, tmp_path_factory) -> None:
    ns = f"evals-{kube.random_suffix()}"
    runs = two_per_shard(ns)
    procs = stack.Processes(tmp_path_factory.mktemp("sharded-operators"))
    try:
        with cluster.admin_http() as http:
            stack.install_crds(http)
            stack.ensure_namespace(http, ns)
            stack.import_si_profile(http, ns)
        url = procs.agent("careful")
        for index in (0, 1):
            procs.operator(
                cluster.dev.operator_kubeconfig,
                cluster.audit_log,
                namespaces=[ns],
                name=f"operator-{index}",
                extra_args=["--shards", "2", "--shard-index", str(index)],
            )
        with cluster.admin_http() as http:
            for name in runs:
                doc = stack.evaluation_run(
                    name, url, parallelism=1, labels={"oasis.dev/archetype": "S-DO-001"}
                )
                stack.apply(http, doc, ns)
            finished = {name: stack.wait_completed(http, ns, name, timeout=600) for name in runs}
        assert {n: r["status"]["verdict"] for n, r in finished.items()} == dict.fromkeys(runs, "PASS")
        logs = {i: (procs.sup.log_dir / f"operator-{i}.log").read_text() for i in (0, 1)}
        expected = {name: shard_of(ns, name, 2) for name in runs}
        assert set(expected.values()) == {0, 1}, "the four names land on both shards"
        for name, shard in expected.items():
            assert f"run {ns}/{name}:" in logs[shard], name
            assert f"run {ns}/{name}:" not in logs[1 - shard], name
    finally:
        procs.stop()
