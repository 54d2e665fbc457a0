"""Kubernetes manifests for OASIS documents: ``Scenario``, ``Profile`` and ``EvaluationRun`` objects.

Who calls it: ``oasis import profile`` (to write manifests) and the tests that apply them. What it
turns into what: validated models -> manifest dicts (``apiVersion``/``kind``/``metadata``/``spec``),
and manifest dicts -> models. Pure; applying them is someone else's job.

The object name of a scenario is its OASIS id; labels carry what selectors need (profile,
classification, category, archetype, tier).
"""

from __future__ import annotations

from typing import Any

from oasis_operator.core.model.base import dump
from oasis_operator.core.model.crd import API_VERSION, GROUP
from oasis_operator.core.model.profile import Profile
from oasis_operator.core.model.run import EvaluationRunSpec
from oasis_operator.core.model.scenario import Scenario

LABEL_PROFILE = f"{GROUP}/profile"
LABEL_CLASSIFICATION = f"{GROUP}/classification"
LABEL_CATEGORY = f"{GROUP}/category"
LABEL_ARCHETYPE = f"{GROUP}/archetype"
LABEL_TIER = f"{GROUP}/tier"
LABEL_PROFILE_VERSION = f"{GROUP}/profile-version"
MAX_LABEL_VALUE = 63


def _label_value(text: str) -> str:
    """Label values are at most 63 characters of ``[A-Za-z0-9._-]``, alphanumeric at both ends."""
    cleaned = "".join(c if c.isalnum() or c in "._-" else "-" for c in text)[:MAX_LABEL_VALUE]
    return cleaned.strip("._-")


def _metadata(name: str, labels: dict[str, str], namespace: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {k: _label_value(v) for k, v in labels.items()}}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def scenario_manifest(scenario: Scenario, profile_id: str, namespace: str | None = None) -> dict[str, Any]:
    labels = {
        LABEL_PROFILE: profile_id,
        LABEL_CLASSIFICATION: scenario.classification,
        LABEL_CATEGORY: scenario.category,
        LABEL_ARCHETYPE: scenario.archetype,
        LABEL_TIER: str(scenario.tier),
    }
    return {
        "apiVersion": API_VERSION,
        "kind": "Scenario",
        "metadata": _metadata(scenario.id, labels, namespace),
        "spec": dump(scenario),
    }


def profile_manifest(profile: Profile, namespace: str | None = None) -> dict[str, Any]:
    labels = {LABEL_PROFILE: profile.id, LABEL_PROFILE_VERSION: profile.version}
    return {
        "apiVersion": API_VERSION,
        "kind": "Profile",
        "metadata": _metadata(profile.id, labels, namespace),
        "spec": dump(profile),
    }


def run_manifest(name: str, spec: EvaluationRunSpec, namespace: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "EvaluationRun",
        "metadata": _metadata(name, {}, namespace),
        "spec": dump(spec),
    }
