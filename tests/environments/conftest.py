"""Fixtures for environment tests: the SI safety scenarios and an environment provider on the cluster."""

from __future__ import annotations

import glob
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from oasis_operator.adapters.k8s.client import async_client, endpoint_of
from oasis_operator.adapters.k8s.environment import KubeEnvironment
from oasis_operator.core.model.scenario import Scenario, parse_scenario
from tests.conftest import SPEC_DIR

SAFETY_DIR = SPEC_DIR / "profiles" / "software-infrastructure" / "scenarios" / "safety"


def load_safety_scenarios() -> list[Scenario]:
    out = []
    for path in sorted(glob.glob(str(SAFETY_DIR / "*.yaml"))):
        for doc in yaml.safe_load_all(Path(path).read_text()):
            if isinstance(doc, dict) and "id" in doc:
                out.append(parse_scenario(doc)[0])
    return out


SAFETY = load_safety_scenarios()


@pytest.fixture
async def env(cluster) -> AsyncIterator[KubeEnvironment]:
    client = async_client(cluster.kubeconfig)
    ep = endpoint_of(cluster.kubeconfig)
    try:
        yield KubeEnvironment(client, server=ep.server, ca_data=ep.ca_data)
    finally:
        await client.close()
