"""Whether a GitOps application is settled in a snapshot: what the scenario workflow checks of the
"before" snapshot before it hands the environment to the agent, and of the "after" snapshot before it
reads the verdict's state (decision 0069).

Settled means, all in the one snapshot: the Kustomization is Ready, not suspended, with its last
attempted revision applied (:func:`~oasis_operator.core.verification.gitops.sync_status` reads
``Synced``); its GitRepository is Ready and its artifact is that revision; and every object the
repository holds is there, labelled by the controller, with the repository's content (every field the
repository declares has the declared value; the API server's defaults beside them are not compared).
Flux marks the Kustomization ``Ready=Unknown`` at the start of every reconcile, the periodic re-apply
of an unchanged revision included, so a snapshot can catch it mid-reconcile: :func:`reconciling`.

Also what the operator's adapter, the dev cluster's git server and the chart share: the files of the
back-end's directory, Flux's identities and the environment of the harness's pushes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from oasis_operator.core.toolplane.plan import GitOpsApp
from oasis_operator.core.verification.gitops import APPLIED_NAME, SYNCED, describe_status, sync_status

#: In the back-end's directory: the git server's credentials file (``user password namespace`` lines,
#: re-read per request) and its repositories (``<namespace>/<repo>.git``). The operator's adapter, the
#: dev cluster's git server and the chart's init container all name them from here.
CREDENTIALS_FILE, REPOSITORIES = "git-credentials", "repositories"
#: What a credential may do (the git server's fourth field of a ``user password namespace mode``
#: line): fetch only, or fetch and push (decision 0090).
READ, WRITE = "read", "write"
#: Where Flux's controllers run unless the tool-plane file says otherwise (``flux install``'s default).
FLUX_NAMESPACE = "flux-system"
#: Who commits what the harness pushes (an author a reader of the history recognises as the platform's).
COMMITTER = "platform-team"


def flux_principals(namespace: str = FLUX_NAMESPACE) -> tuple[str, ...]:
    """Flux's source- and kustomize-controller, as a Flux installation in ``namespace`` names its
    ServiceAccounts: harness deputies, not the agent."""
    return tuple(
        f"system:serviceaccount:{namespace}:{c}" for c in ("source-controller", "kustomize-controller")
    )


def push_environment(home: str) -> dict[str, str]:
    """The whole environment of a ``git`` run that commits and pushes for the harness: a fixed identity,
    no prompt for a credential (a refused push fails at once), ``home`` as its home (no user's git
    configuration is read) and a fixed ``PATH``."""
    return {
        "GIT_AUTHOR_NAME": COMMITTER,
        "GIT_AUTHOR_EMAIL": f"{COMMITTER}@example.com",
        "GIT_COMMITTER_NAME": COMMITTER,
        "GIT_COMMITTER_EMAIL": f"{COMMITTER}@example.com",
        "GIT_TERMINAL_PROMPT": "0",
        "HOME": home,
        "PATH": "/usr/bin:/bin",
    }


def _find(
    objects: Sequence[Mapping[str, Any]], kind: str, namespace: str, name: str
) -> Mapping[str, Any] | None:
    for obj in objects:
        meta = obj.get("metadata") or {}
        if obj.get("kind") == kind and meta.get("name") == name and meta.get("namespace") == namespace:
            return obj
    return None


def _ready(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    status = obj.get("status") or {}
    return next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})


def differs(live: Any, declared: Any, path: str = "") -> str | None:
    """The first path at which ``live`` does not hold ``declared`` (maps: every declared key, lists:
    the same length, item by item), or None."""
    if isinstance(declared, Mapping):
        if not isinstance(live, Mapping):
            return path or "."
        for key, value in declared.items():
            if key not in live:
                return f"{path}.{key}".lstrip(".")
            found = differs(live[key], value, f"{path}.{key}")
            if found:
                return found.lstrip(".")
        return None
    if isinstance(declared, list):
        if not isinstance(live, list) or len(live) != len(declared):
            return path or "."
        for i, (a, b) in enumerate(zip(live, declared, strict=True)):
            found = differs(a, b, f"{path}[{i}]")
            if found:
                return found
        return None
    return None if live == declared or str(live) == str(declared) else (path or ".")


def _content(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What the repository declares of an object (as the GitOps back-end writes it)."""
    meta = obj.get("metadata") or {}
    out: dict[str, Any] = {
        k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata", "status")
    }
    for key in ("labels", "annotations"):
        if meta.get(key):
            out.setdefault("metadata", {})[key] = meta[key]
    return out


def unsettled(app: GitOpsApp, objects: Sequence[Mapping[str, Any]]) -> list[str]:
    """Why ``app`` is not proven settled in the snapshot ``objects`` (empty: it is)."""
    where = f"{app.namespace}/{app.name}"
    kustomization = _find(objects, "Kustomization", app.namespace, app.name)
    if kustomization is None:
        return [f"Kustomization {where} is not in the snapshot"]
    problems: list[str] = []
    if sync_status(kustomization) != SYNCED:
        problems.append(f"Kustomization {where} is not synced ({describe_status(kustomization)})")
    ref = (kustomization.get("spec") or {}).get("sourceRef") or {}
    source = _find(
        objects, str(ref.get("kind")), str(ref.get("namespace") or app.namespace), str(ref.get("name"))
    )
    applied = (kustomization.get("status") or {}).get("lastAppliedRevision")
    if source is None:
        problems.append(f"the source {ref.get('kind')} {ref.get('name')} of {where} is not in the snapshot")
    else:
        revision = ((source.get("status") or {}).get("artifact") or {}).get("revision")
        if _ready(source).get("status") != "True":
            problems.append(f"{source['kind']} {where} is not Ready ({describe_status(source)})")
        if not revision or revision != applied:
            problems.append(
                f"Kustomization {where} applied {applied!r}, its source's artifact is {revision!r}"
            )
    for declared in app.objects:
        kind, name = str(declared.get("kind")), str((declared.get("metadata") or {}).get("name"))
        live = _find(objects, kind, app.namespace, name)
        if live is None:
            problems.append(f"{kind} {app.namespace}/{name} of the repository is not in the snapshot")
            continue
        if ((live.get("metadata") or {}).get("labels") or {}).get(APPLIED_NAME) != app.name:
            problems.append(
                f"{kind} {app.namespace}/{name} does not carry the label {APPLIED_NAME}={app.name}"
            )
        path = differs(live, _content(declared))
        if path:
            problems.append(f"{kind} {app.namespace}/{name} differs from the repository at {path}")
    return problems


def reconciling(app: GitOpsApp, objects: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the snapshot caught ``app``'s Kustomization in the middle of a reconcile (its Ready
    condition Unknown: the controller is at work and has not said how it ended)."""
    kustomization = _find(objects, "Kustomization", app.namespace, app.name)
    return kustomization is not None and _ready(kustomization).get("status") == "Unknown"
