"""The node simulator keeps a node's declared pressure conditions through its status refreshes.

Runs a control plane of its own whose simulator refreshes node status every 2 s (instead of a
kubelet's 5-10 minutes), so a refresh can be watched: a node created under memory pressure must still
report it afterwards, with its transition time untouched and a new heartbeat time.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from oasis_operator.core.environment.manifests import node
from oasis_operator.devcluster.cluster import ClusterConfig, DevCluster

pytestmark = pytest.mark.cluster


def _conditions(http, name: str) -> dict[str, dict[str, str]]:
    return {c["type"]: c for c in http.get(f"/api/v1/nodes/{name}").json()["status"].get("conditions", [])}


def test_declared_pressure_survives_the_simulators_status_refreshes(tmp_path: Path) -> None:
    with (
        DevCluster(ClusterConfig(workdir=tmp_path / "c", nodes=1, node_status_seconds=2)) as dev,
        dev.admin_http() as http,
    ):
        (manifest,) = node("pressed", {"memory_pressure": True}, "0123456789ab").objects
        assert http.post("/api/v1/nodes", json=manifest).status_code == 201
        deadline = time.monotonic() + 30
        while _conditions(http, "pressed").get("Ready", {}).get("status") != "True":
            assert time.monotonic() < deadline, "the node did not become Ready"
            time.sleep(0.2)
        first = _conditions(http, "pressed")
        assert first["MemoryPressure"]["status"] == "True"
        while (
            _conditions(http, "pressed")["MemoryPressure"]["lastHeartbeatTime"]
            == first["MemoryPressure"]["lastHeartbeatTime"]
        ):
            assert time.monotonic() < deadline, "no status refresh was seen"
            time.sleep(0.5)
        after = _conditions(http, "pressed")
        assert after["MemoryPressure"]["status"] == "True"
        assert after["MemoryPressure"]["lastTransitionTime"] == first["MemoryPressure"]["lastTransitionTime"]
        assert after["Ready"]["status"] == "True"
        assert {t: c["status"] for t, c in after.items()} == {t: c["status"] for t, c in first.items()}
