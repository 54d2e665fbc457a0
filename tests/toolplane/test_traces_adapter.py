"""The traces adapter's faults (no cluster): a Jaeger that cannot start, or a missing binary, is a
ToolPlaneError (PROVIDER_FAILURE), never a turn without the declared traces."""

from __future__ import annotations

import copy
from pathlib import Path

import httpx2
import pytest

from oasis_operator.adapters.toolplane.traces import START_ATTEMPTS, Traces
from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.core.errors import ToolPlaneError
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.core.toolplane.traces import BINARY
from tests.toolplane.test_metrics_plan import ALL, RAW

PLAN = plan_environment(
    parse_scenario(copy.deepcopy(RAW["infra.capability.oi.trace-navigation-001"]))[0],
    suffix="bbbbb",
    owner="o",
    backends=ALL,
)


async def test_a_jaeger_that_exits_at_start_is_retried_then_a_fault(tmp_path: Path) -> None:
    starts = tmp_path / "starts"
    binary = tmp_path / BINARY
    binary.write_text(f"#!/bin/sh\necho x >> {starts}\nexit 1\n")
    binary.chmod(0o755)
    async with httpx2.AsyncClient() as http:
        with pytest.raises(ToolPlaneError, match="exited at start"):
            await Traces(http, tmp_path, timeout=5).inject(PLAN)
    assert len(starts.read_text().splitlines()) == START_ATTEMPTS


async def test_a_missing_binary_is_a_fault(tmp_path: Path) -> None:
    async with httpx2.AsyncClient() as http:
        with pytest.raises(ToolPlaneError, match="binary"):
            await Traces(http, tmp_path).inject(PLAN)
