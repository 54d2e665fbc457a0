"""Fixtures for environment tests: the SI safety scenarios and an environment provider on the cluster."""

from __future__ import annotations

import glob
from pathlib import Path

import yaml

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
