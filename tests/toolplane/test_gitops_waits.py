"""What the GitOps adapter's provisioning waits read in Flux's status (decision 0075): when the source
serves the pushed commit, when a finished attempt calls for asking the controller again, and what a
timeout names. The waits themselves run against the real controllers in
``test_gitops_provisioning_live.py``."""

from __future__ import annotations

from typing import Any

import pytest

from oasis_operator.adapters.toolplane.gitops import _attempt_failed, _describe, _serves, _source_behind

COMMIT = "a2a38f633f231e3a368dfa368df964f557dcbaeb"
EARLIER = "51372c00aa6a0f5e7a1f0c1b4bfb1de0f2d1c6a9"


def source(ready: str, revision: str | None, reason: str = "Succeeded", message: str = "") -> dict[str, Any]:
    status: dict[str, Any] = {
        "conditions": [{"type": "Ready", "status": ready, "reason": reason, "message": message}]
    }
    if revision is not None:
        status["artifact"] = {"revision": f"main@sha1:{revision}"}
    return status


def ready_of(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == "Ready")


@pytest.mark.parametrize(
    ("ready", "revision", "served", "behind"),
    [
        ("True", COMMIT, True, False),
        ("True", EARLIER, False, True),  # fetched before the push, or not since: ask again
        ("Unknown", COMMIT, False, False),  # fetching: let it finish
        ("Unknown", None, False, False),
        ("False", None, False, True),  # the fetch failed: ask again (Flux backs off on its own)
        ("False", EARLIER, False, True),
    ],
)
def test_the_source_serves_the_pushed_commit_only_ready_with_that_revision(
    ready: str, revision: str | None, served: bool, behind: bool
) -> None:
    status = source(ready, revision)
    assert _serves(COMMIT)(status, ready_of(status)) is served
    assert _source_behind(COMMIT)(status, ready_of(status)) is behind


def test_a_short_commit_or_another_branch_is_not_the_pushed_commit() -> None:
    status = source("True", COMMIT[:12])
    assert not _serves(COMMIT)(status, ready_of(status))
    assert _source_behind(COMMIT)(status, ready_of(status))


@pytest.mark.parametrize(("ready", "failed"), [("False", True), ("Unknown", False), ("True", False)])
def test_only_a_finished_failed_attempt_of_the_kustomization_is_retried(ready: str, failed: bool) -> None:
    status = {"conditions": [{"type": "Ready", "status": ready, "reason": "BuildFailed", "message": "x"}]}
    assert _attempt_failed(status, ready_of(status)) is failed


def test_a_timeout_names_the_revision_seen_and_the_cause_deep_in_kustomizes_message() -> None:
    cause = (
        "evalsymlink failure on '/tmp/kustomization-1/apps/api-service' : lstat: no such file or directory"
    )
    message = (
        "kustomize build failed: accumulating resources: accumulation err='accumulating resources from "
        f"'./deployment-api-service.yaml': open failed': must build at directory: not a valid directory: {cause}"
    )
    status = source("True", EARLIER)
    assert _describe(status, ready_of(status)) == f"Ready=True Succeeded: ; revision main@sha1:{EARLIER}"
    assert _describe({}, {}).endswith("no revision yet")
    kustomization = {
        "lastAttemptedRevision": f"main@sha1:{COMMIT}",
        "conditions": [{"type": "Ready", "status": "False", "reason": "BuildFailed", "message": message}],
    }
    described = _describe(kustomization, ready_of(kustomization))
    assert cause in described  # the old 150 characters stopped before it
    assert described.endswith(f"revision main@sha1:{COMMIT}")
