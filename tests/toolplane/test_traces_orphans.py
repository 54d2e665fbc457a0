"""A scenario's own Jaeger does not outlive the operator that started it: killed without a chance to
clean up (SIGKILL), the operator takes its Jaegers with it (decision 0055's per-scenario stores)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from oasis_operator.adapters.toolplane.traces import TracesSettings
from oasis_operator.handlers.settings import ToolPlaneSettings
from tests.conftest import ClusterHandle

pytestmark = pytest.mark.cluster

OPERATOR = """
import asyncio, sys
from pathlib import Path
import httpx2
from oasis_operator.adapters.toolplane.traces import Traces

async def main():
    async with httpx2.AsyncClient() as http:
        store = await Traces(http, Path(sys.argv[1]))._start("orphan-check")
        print(store.process.pid, flush=True)
        await asyncio.sleep(3600)

asyncio.run(main())
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_a_scenarios_jaeger_dies_with_the_operator_that_started_it(cluster: ClusterHandle) -> None:
    traces = ToolPlaneSettings.load(cluster.dev.toolplane_file).of(TracesSettings)
    assert traces is not None
    directory = traces.directory
    operator = subprocess.Popen(
        [sys.executable, "-c", OPERATOR, str(directory)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    try:
        assert operator.stdout is not None
        jaeger = int(operator.stdout.readline().strip())
        assert _alive(jaeger)
    finally:
        operator.send_signal(signal.SIGKILL)
        operator.wait(timeout=30)
    deadline = time.monotonic() + 15
    while _alive(jaeger) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(jaeger), f"Jaeger {jaeger} outlived the operator that started it"
