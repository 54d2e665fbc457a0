"""Fixtures of the model tests: where the spec's official profile is, and its import (done once)."""

from __future__ import annotations

from pathlib import Path

import pytest

from oasis_operator.core.model.profile import Profile
from oasis_operator.loading.documents import load_paths
from oasis_operator.loading.profile_dir import ImportedProfile, import_profile

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / ".." / "shared" / "oasis-spec"
SI_DIR = SPEC / "profiles" / "software-infrastructure"
EXAMPLES = REPO / "examples"
MALFORMED = Path(__file__).resolve().parent / "malformed"


@pytest.fixture(scope="session")
def si_import() -> ImportedProfile:
    imported = import_profile(SI_DIR)
    assert imported.profile is not None, [f.render() for f in imported.errors]
    return imported


@pytest.fixture(scope="session")
def si_profile(si_import: ImportedProfile) -> Profile:
    assert si_import.profile is not None
    return si_import.profile


@pytest.fixture(scope="session")
def example_profile() -> Profile:
    result = load_paths([EXAMPLES / "profiles" / "example-kubernetes-ops.yaml"])
    assert not result.errors, [f.render() for f in result.errors]
    model: Profile = result.of_kind("profile")[0].model
    return model
