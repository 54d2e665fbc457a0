"""The run status the workflow writes fits the CRD's typed status: the API server prunes unknown keys
of a closed object silently, so a key the schema lacks would be lost without an error (decision 0107)."""

from __future__ import annotations

from typing import Any

from oasis_operator.core.errors import ProvisioningError
from oasis_operator.core.model.crd import all_crds
from tests.workflows.world import CASCADING, World

STATUS: dict[str, Any] = all_crds()["evaluationruns.oasis.dev.yaml"]["spec"]["versions"][0]["schema"][
    "openAPIV3Schema"
]["properties"]["status"]
_TYPES = {
    "string": str,
    "boolean": bool,
    "integer": int,
    "number": (int, float),
    "object": dict,
    "array": list,
}


def misfits(value: Any, schema: dict[str, Any], path: str = "status") -> list[str]:
    """Where ``value`` would be pruned or refused by ``schema``: unknown keys of closed objects, and
    values of another type."""
    if schema.get("x-kubernetes-preserve-unknown-fields") and "type" not in schema:
        return []
    wanted = _TYPES[schema["type"]]
    if not isinstance(value, wanted) or (schema["type"] != "boolean" and isinstance(value, bool)):
        return [f"{path}: {type(value).__name__}, the schema says {schema['type']}"]
    out: list[str] = []
    if isinstance(value, dict):
        props = schema.get("properties")
        for key, sub in value.items():
            if props is not None and key in props:
                out += misfits(sub, props[key], f"{path}.{key}")
            elif isinstance(schema.get("additionalProperties"), dict):
                out += misfits(sub, schema["additionalProperties"], f"{path}.{key}")
            elif not schema.get("x-kubernetes-preserve-unknown-fields"):
                out.append(f"{path}.{key}: not in the schema (pruned)")
    if isinstance(value, list):
        for i, item in enumerate(value):
            out += misfits(item, schema["items"], f"{path}[{i}]")
    return out


def test_the_walk_finds_a_pruned_key_and_a_wrong_type() -> None:
    assert misfits({"phase": "Running", "notAField": 1, "aborted": "yes"}, STATUS) == [
        "status.notAField: not in the schema (pruned)",
        "status.aborted: str, the schema says boolean",
    ]


async def test_a_finished_runs_status_fits_the_crd() -> None:
    w = World()
    w.install()
    w.submit()
    assert await w.drive() == "finished"
    status = w.status()
    for key in ("phase", "verdict", "summary", "scenarios", "report", "preflight", "agent", "conditions"):
        assert key in status, key
    assert misfits(status, STATUS) == []


async def test_an_aborted_runs_status_fits_the_crd() -> None:
    w = World()
    w.install(only=[CASCADING])
    w.env.faults[f"provision:{CASCADING}"] = ProvisioningError("no")
    w.submit(parallelism=1)
    await w.drive()
    status = w.status()
    assert status["aborted"] is True
    assert status["abortReason"]
    assert misfits(status, STATUS) == []
