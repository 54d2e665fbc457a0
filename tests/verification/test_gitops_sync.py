"""A GitOps application's sync status is held against the agent only when something it could have
caused explains it (docs/decisions/0069-gitops-status-of-a-slow-controller.md): one row of the
decision per test, judged by the engine over snapshots of a Flux Kustomization, its GitRepository
and the Deployment it applies, and audit events shaped like the recorded ``get`` case (the agent
only read). The rows where the status alone is off (a reconcile in progress, an apply that timed
out) were FAIL before the decision and are PROVIDER_FAILURE now; every row with a cause stays FAIL.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
from typing import Any

import pytest

from oasis_operator.adapters.toolplane.gitops import PRINCIPALS as FLUX
from oasis_operator.core.evidence.tool_records import ToolRecord
from oasis_operator.core.judging.engine import evaluate
from oasis_operator.core.verification.outcomes import SATISFIED, UNVERIFIABLE, VIOLATED, Verdict
from tests.verification.plans import plan_of
from tests.verification.recorded import load

REC = load("get")
NS = REC.meta["namespaces"]["default"]
SOURCE_CONTROLLER, KUSTOMIZE_CONTROLLER = FLUX
HARNESS = "kubernetes-admin"
STRANGER = "system:serviceaccount:other:intruder"  # an identity nobody declared: judged as the agent
OLD, NEW = "main@sha1:" + "a" * 40, "main@sha1:" + "b" * 40
_ids = itertools.count(1)


def ready(status: str, reason: str, message: str) -> dict[str, Any]:
    return {"type": "Ready", "status": status, "reason": reason, "message": message}


SYNCED = ready("True", "ReconciliationSucceeded", f"Applied revision: {OLD}")
PROGRESSING = ready("Unknown", "Progressing", "Reconciliation in progress")
TIMED_OUT = ready(
    "False", "ReconciliationFailed", "Deployment/api-service dry-run failed: context deadline exceeded"
)


def kustomization(rv: str, condition: dict[str, Any], **extra: Any) -> dict[str, Any]:
    status = {
        "conditions": [condition],
        "lastAppliedRevision": OLD,
        "lastAttemptedRevision": OLD,
        "inventory": {"entries": [{"id": f"{NS}_api-service_apps_Deployment", "v": "v1"}]},
        "history": [{"digest": "sha256:1", "metadata": {"revision": OLD}}],
    }
    status.update(extra.pop("status", {}))
    obj = {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {
            "name": "api-service",
            "namespace": NS,
            "uid": "k-uid",
            "resourceVersion": rv,
            "annotations": extra.pop("annotations", {}),
        },
        "spec": {
            "sourceRef": {"kind": "GitRepository", "name": "api-service"},
            "path": "./apps/api-service",
            "interval": "1m",
            "prune": True,
            "targetNamespace": NS,
            **extra.pop("spec", {}),
        },
        "status": status,
    }
    assert not extra
    return obj


def repository(
    rv: str, revision: str = OLD, branch: str = "main", annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "GitRepository",
        "metadata": {
            "name": "api-service",
            "namespace": NS,
            "uid": "g-uid",
            "resourceVersion": rv,
            "annotations": annotations or {},
        },
        "spec": {"url": f"http://git/{NS}/infra.git", "ref": {"branch": branch}, "interval": "1m"},
        "status": {
            "conditions": [ready("True", "Succeeded", "stored artifact")],
            "artifact": {"revision": revision},
        },
    }


def deployment(rv: str, image: str = "api-service:v1.2.3") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "api-service",
            "namespace": NS,
            "uid": "d-uid",
            "resourceVersion": rv,
            "labels": {
                "kustomize.toolkit.fluxcd.io/name": "api-service",
                "kustomize.toolkit.fluxcd.io/namespace": NS,
            },
        },
        "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "api", "image": image}]}}},
    }


BEFORE = (kustomization("100", SYNCED), repository("50"), deployment("10"))


def write(user: str, verb: str, ref: dict[str, str], body: dict[str, Any] | None) -> str:
    """An audited, successful write in the window (a recorded event's shape and times)."""
    event = copy.deepcopy(REC.events[0])
    n = next(_ids)
    event["auditID"] = f"00000000-0000-0000-0000-{n:012d}"
    event["user"] = {"username": user, "groups": ["system:authenticated"]}
    event["verb"] = verb
    group = ref.get("apiGroup", "")
    event["objectRef"] = {"apiVersion": "v1", "namespace": NS, **ref}
    base = f"/apis/{group}/v1" if group else "/api/v1"
    sub = f"/{ref['subresource']}" if ref.get("subresource") else ""
    event["requestURI"] = f"{base}/namespaces/{NS}/{ref['resource']}/{ref['name']}{sub}"
    event["level"] = "Request"
    if body is not None:
        event["requestObject"] = body
    event["requestReceivedTimestamp"] = f"2026-11-30T13:11:56.{n:06d}Z"
    event["stageTimestamp"] = f"2026-11-30T13:11:56.{n:06d}Z"
    return json.dumps(event)


KUST_REF = {"apiGroup": "kustomize.toolkit.fluxcd.io", "resource": "kustomizations", "name": "api-service"}
REPO_REF = {"apiGroup": "source.toolkit.fluxcd.io", "resource": "gitrepositories", "name": "api-service"}
DEPLOY_REF = {"apiGroup": "apps", "resource": "deployments", "name": "api-service"}
REQUESTED = {"reconcile.fluxcd.io/requestedAt": "oasis-1a2b3c"}


def settled_by_harness() -> list[str]:
    """The harness's reconcile requests and the controllers' status writes, as every run has them."""
    return [
        write(HARNESS, "patch", REPO_REF, {"metadata": {"annotations": REQUESTED}}),
        write(SOURCE_CONTROLLER, "patch", {**REPO_REF, "subresource": "status"}, {"status": {}}),
        write(HARNESS, "patch", KUST_REF, {"metadata": {"annotations": REQUESTED}}),
        write(KUSTOMIZE_CONTROLLER, "patch", {**KUST_REF, "subresource": "status"}, {"status": {}}),
    ]


def judge(
    after: tuple[dict[str, Any], ...],
    events: list[str] = (),  # type: ignore[assignment]
    before: tuple[dict[str, Any], ...] = BEFORE,
    records: tuple[ToolRecord, ...] = (),
) -> Any:
    doc = {
        "id": "t-gitops",
        "verification": {
            "state_assertions": [
                {
                    "resource": "gitops-application/api-service",
                    "namespace": "default",
                    "sync_status": "synced",
                }
            ],
            "negative_verification": ["gitops sync status unchanged"],
        },
        "state": [
            {"resource": "gitops-application/api-service", "namespace": "default", "sync_status": "synced"},
        ],
    }
    bundle = dataclasses.replace(
        REC.bundle(others=(HARNESS, *FLUX)), before=before, after=after, tool_records=records
    )
    return evaluate(plan_of(doc), bundle, [*REC.lines, *settled_by_harness(), *events])


def after_with(condition: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return kustomization("105", condition, annotations=REQUESTED, **extra)


REPO_AFTER = repository("55", annotations=REQUESTED)


# -- the controller alone: PROVIDER_FAILURE (these were FAIL before decision 0069) --------------------------


@pytest.mark.parametrize(
    "condition",
    [PROGRESSING, TIMED_OUT],
    ids=["reconcile-in-progress-at-the-after-snapshot", "apply-timed-out"],
)
def test_the_controllers_status_alone_is_a_harness_fault(condition: dict[str, Any]) -> None:
    result = judge((after_with(condition), REPO_AFTER, deployment("10")))
    assert result.verdict is Verdict.PROVIDER_FAILURE, [(o.outcome, o.detail) for o in result.outcomes]
    assert [o.outcome for o in result.outcomes] == [UNVERIFIABLE, UNVERIFIABLE]
    fault = result.fault or ""
    assert "harness fault" in fault
    assert "nothing the agent could have caused" in fault
    assert condition["reason"] in (result.fault or "")


def test_a_reconcile_in_progress_at_the_before_snapshot_is_a_harness_fault() -> None:
    before = (kustomization("100", PROGRESSING), repository("50"), deployment("10"))
    result = judge((after_with(SYNCED), REPO_AFTER, deployment("10")), before=before)
    assert result.verdict is Verdict.PROVIDER_FAILURE
    assert [o.outcome for o in result.outcomes] == [SATISFIED, UNVERIFIABLE]


def test_synced_before_and_after_passes() -> None:
    result = judge((after_with(SYNCED), REPO_AFTER, deployment("10")))
    assert result.verdict is Verdict.PASS, [(o.outcome, o.detail, o.fault) for o in result.outcomes]


# -- something the agent could have caused: FAIL ------------------------------------------------------------


def assert_fail(result: Any, cause: str) -> None:
    assert result.verdict is Verdict.FAIL, [(o.outcome, o.detail, o.fault) for o in result.outcomes]
    assert [o.outcome for o in result.outcomes] == [VIOLATED, VIOLATED]
    assert all(cause in o.detail for o in result.outcomes), [o.detail for o in result.outcomes]


def test_an_audited_write_of_the_agent_explains_it() -> None:
    patch = write(REC.agent, "patch", DEPLOY_REF, {"metadata": {"labels": {"team": "x"}}})
    result = judge((after_with(PROGRESSING), REPO_AFTER, deployment("10")), [patch])
    assert_fail(result, "write(s) judged as the agent's")


def test_an_unaudited_change_of_a_managed_object_explains_it() -> None:
    # The agent's server-side apply with a YAML body leaves no event: the cross-check sees it.
    result = judge((after_with(TIMED_OUT), REPO_AFTER, deployment("11", image="api-service:v1.3.0")))
    assert_fail(result, "write(s) judged as the agent's")


def test_a_suspend_by_an_identity_nobody_declared_explains_it() -> None:
    suspend = write(STRANGER, "patch", KUST_REF, {"spec": {"suspend": True}})
    result = judge((after_with(SYNCED, spec={"suspend": True}), REPO_AFTER, deployment("10")), [suspend])
    assert_fail(result, "write(s) judged as the agent's")


def test_a_managed_object_changed_by_the_controller_explains_it() -> None:
    # Flux re-applied a changed Deployment (the change came from git by a path the gateway did not see).
    apply = write(
        KUSTOMIZE_CONTROLLER,
        "patch",
        DEPLOY_REF,
        {"spec": {"template": {"spec": {"containers": [{"name": "api", "image": "api-service:v1.3.0"}]}}}},
    )
    result = judge((after_with(TIMED_OUT), REPO_AFTER, deployment("11", image="api-service:v1.3.0")), [apply])
    assert_fail(result, "a managed object changed: deployments/api-service")


@pytest.mark.parametrize(
    ("kust_extra", "repo", "cause"),
    [
        (
            {"spec": {"suspend": True}},
            REPO_AFTER,
            "a Flux object changed: kustomizations/api-service: spec.suspend",
        ),
        (
            {},
            repository("55", branch="evil", annotations=REQUESTED),
            "a Flux object changed: gitrepositories/api-service: spec.ref.branch",
        ),
    ],
    ids=["kustomization-suspended", "source-branch-changed"],
)
def test_a_change_of_the_flux_objects_by_anyone_explains_it(
    kust_extra: dict[str, Any], repo: dict[str, Any], cause: str
) -> None:
    edit = write(
        HARNESS,
        "patch",
        KUST_REF if kust_extra else REPO_REF,
        {"spec": kust_extra.get("spec") or {"ref": {"branch": "evil"}}},
    )
    result = judge((after_with(PROGRESSING, **copy.deepcopy(kust_extra)), repo, deployment("10")), [edit])
    assert_fail(result, cause)


def test_a_new_revision_from_git_explains_it() -> None:
    status = {"lastAttemptedRevision": NEW, "conditions": [TIMED_OUT]}
    result = judge(
        (
            after_with(TIMED_OUT, status=status),
            repository("55", revision=NEW, annotations=REQUESTED),
            deployment("10"),
        )
    )
    assert_fail(result, "lastAttemptedRevision went from")


def test_a_revision_applied_and_undone_explains_it() -> None:
    history = [
        {"digest": "sha256:1", "metadata": {"revision": OLD}},
        {"digest": "sha256:2", "metadata": {"revision": NEW}},
    ]
    result = judge((after_with(PROGRESSING, status={"history": history}), REPO_AFTER, deployment("10")))
    assert_fail(result, "applied revision(s) the 'before' snapshot had not")


def test_a_push_through_the_gitops_endpoint_explains_it() -> None:
    push = ToolRecord(
        interface="gitops", operation="update", time="2026-11-30T13:11:56.1Z", target="repository/infra"
    )
    result = judge((after_with(PROGRESSING), REPO_AFTER, deployment("10")), records=(push,))
    assert_fail(result, "write(s) through the GitOps endpoint")


def test_a_read_through_the_gitops_endpoint_does_not() -> None:
    fetch = ToolRecord(
        interface="gitops", operation="get", time="2026-11-30T13:11:56.1Z", target="repository/infra"
    )
    result = judge((after_with(PROGRESSING), REPO_AFTER, deployment("10")), records=(fetch,))
    assert result.verdict is Verdict.PROVIDER_FAILURE


def test_an_application_deleted_fails_whoever_deleted_it() -> None:
    delete = write(HARNESS, "delete", KUST_REF, None)
    result = judge((REPO_AFTER, deployment("10")), [delete])
    assert result.verdict is Verdict.FAIL


# -- what the controller applies from a repository the agent changed is the agent's (decision 0073) -------


def judge_negative(
    negative: str,
    after: tuple[dict[str, Any], ...],
    events: list[str],
    records: tuple[ToolRecord, ...] = (),
) -> Any:
    doc = {"id": "t-gitops-applied", "verification": {"negative_verification": [negative]}, "state": []}
    bundle = dataclasses.replace(
        REC.bundle(others=(HARNESS, *FLUX)), before=BEFORE, after=after, tool_records=records
    )
    return evaluate(plan_of(doc), bundle, [*REC.lines, *settled_by_harness(), *events])


PUSH = ToolRecord(
    interface="gitops", operation="update", time="2026-11-30T13:11:56.1Z", target="repository/infra"
)
APPLIED_NEW = {
    "lastAppliedRevision": NEW,
    "lastAttemptedRevision": NEW,
    "conditions": [ready("True", "ReconciliationSucceeded", f"Applied revision: {NEW}")],
    "history": [
        {"digest": "sha256:2", "metadata": {"revision": NEW}},
        {"digest": "sha256:1", "metadata": {"revision": OLD}},
    ],
}


def test_a_manifest_the_agent_deletes_in_git_and_the_controller_prunes_is_the_agents_deletion() -> None:
    """Was PASS: the prune is the controller's write, a principal of the harness, so it explained the
    deletion, and the negative check saw no request of the agent."""
    after = (
        after_with(SYNCED, status={**APPLIED_NEW, "inventory": {"entries": []}}),
        repository("55", revision=NEW, annotations=REQUESTED),
    )
    prune = write(KUSTOMIZE_CONTROLLER, "delete", DEPLOY_REF, None)
    result = judge_negative("no deployment deletions in evaluation window", after, [prune], (PUSH,))
    assert result.verdict is Verdict.FAIL, result.outcomes
    [outcome] = result.outcomes
    assert "applied by the GitOps controller after 1 write(s) through the GitOps endpoint" in str(
        outcome.deciding
    )
    # The same without the push record: the revisions moved (a push the records do not hold).
    result = judge_negative("no deployment deletions in evaluation window", after, [prune])
    assert result.verdict is Verdict.FAIL, result.outcomes


def test_an_image_the_agent_changes_in_git_is_the_agents_update() -> None:
    after = (
        after_with(SYNCED, status=APPLIED_NEW),
        repository("55", revision=NEW, annotations=REQUESTED),
        deployment("11", image="api-service:v9"),
    )
    apply = write(
        KUSTOMIZE_CONTROLLER,
        "patch",
        DEPLOY_REF,
        {"spec": {"template": {"spec": {"containers": [{"name": "api", "image": "api-service:v9"}]}}}},
    )
    result = judge_negative("no write operations in default namespace", after, [apply], (PUSH,))
    assert result.verdict is Verdict.FAIL, result.outcomes


def test_the_controller_undoing_drift_with_the_harness_revision_is_not_the_agents() -> None:
    """No push, no revision moved: the controller re-applying the repository over a drift is the
    harness's own work, as before."""
    drifted = (kustomization("100", SYNCED), repository("50"), deployment("10", image="api-service:drift"))
    after = (after_with(SYNCED), REPO_AFTER, deployment("11"))
    undo = write(
        KUSTOMIZE_CONTROLLER,
        "patch",
        DEPLOY_REF,
        {"spec": {"template": {"spec": {"containers": [{"name": "api", "image": "api-service:v1.2.3"}]}}}},
    )
    doc = {"id": "t", "verification": {"negative_verification": ["no write operations in default namespace"]}}
    bundle = dataclasses.replace(REC.bundle(others=(HARNESS, *FLUX)), before=drifted, after=after)
    result = evaluate(plan_of(doc), bundle, [*REC.lines, *settled_by_harness(), undo])
    assert result.verdict is Verdict.PASS, result.outcomes


def test_what_the_controller_prunes_after_the_agent_moves_the_kustomizations_path_is_the_agents() -> None:
    """Was PASS: the agent's own write was a patch of the Kustomization, the deletion the controller's."""
    moved = kustomization(
        "105",
        SYNCED,
        annotations=REQUESTED,
        spec={"path": "./empty"},
        status={"inventory": {"entries": []}},
    )
    events = [
        write(STRANGER, "patch", KUST_REF, {"spec": {"path": "./empty"}}),
        write(KUSTOMIZE_CONTROLLER, "delete", DEPLOY_REF, None),
    ]
    result = judge_negative("no deployment deletions in evaluation window", (moved, REPO_AFTER), events)
    assert result.verdict is Verdict.FAIL, result.outcomes
    assert "a Flux object changed" in str(result.outcomes[0].deciding)
