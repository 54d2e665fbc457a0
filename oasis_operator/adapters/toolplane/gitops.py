"""The GitOps back-end's adapter: a scenario's ``managed_by: gitops`` objects kept in a git repository
(the git server of decision 0050) and applied by Flux's kustomize-controller, which re-applies them
at every interval, so a direct edit is drift the controller reverts (its write audited under its
own identity).

Called by :class:`~oasis_operator.adapters.toolplane.ToolPlane`; turns ``plan.toolplane.gitops`` into a
pushed commit, a credential Secret, a GitRepository and a Kustomization in the application's
namespace, then waits until the Kustomization reports the commit applied and the objects carry the
controller's labels. The Kustomization names the account the controller applies as
(``gitops-deployer``, the agent's rights in that namespace, planned with the scenario's manifests:
decision 0090). The agent's git credential (held by the recording gateway) reaches its namespace's
repositories only and is revoked when its turn ends; the controller fetches with a credential of its
own, which cannot push, so the settle's fetch still reads what the agent pushed (decision 0069) and the
Secret the agent can read opens no way around the gateway.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import yaml

from oasis_operator.adapters.plumbing.apply import server_side_apply
from oasis_operator.adapters.plumbing.git import GitFailed, push_tree
from oasis_operator.core.environment.gitops_deployer import DEPLOYER
from oasis_operator.core.environment.plan import EnvironmentPlan
from oasis_operator.core.errors import ToolPlaneError
from oasis_operator.core.ports import AgentAccess, ToolEndpoint
from oasis_operator.core.toolplane import registry
from oasis_operator.core.toolplane.gitops import (
    CREDENTIALS_FILE,
    FLUX_NAMESPACE,
    READ,
    REPOSITORIES,
    WRITE,
    flux_principals,
)
from oasis_operator.core.toolplane.plan import GitOpsApp, TimedChange

from .factory import EntryError, Factory, FileEntry
from .probe import served

FIELD_MANAGER = "oasis-gitops"
#: Whose git credential, each a user of the git server: the agent's (held by the recording gateway,
#: revoked at the end of its turn), the controller's (the GitRepository's Secret, which the agent can
#: read: fetch only, decision 0090) and the harness's own push (made, used and revoked in one inject).
AGENT, CONTROLLER, HARNESS = "git", "flux", "seed"
KUSTOMIZATIONS = "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/{ns}/kustomizations"
GIT_REPOSITORIES = "/apis/source.toolkit.fluxcd.io/v1/namespaces/{ns}/gitrepositories"
#: The label kustomize-controller puts on what it applies.
APPLIED_LABEL = "kustomize.toolkit.fluxcd.io/name"
#: Flux's "reconcile now" annotation: a new value asks the controller for a reconcile.
REQUESTED_AT = "reconcile.fluxcd.io/requestedAt"
#: The first pause before asking a controller whose attempt failed to try again (then 2x, 3x, ...).
RETRY_PAUSE = 1.0
#: How much of a controller's message an error quotes (kustomize's errors put the cause mid-message).
MESSAGE_CHARS = 600

#: Flux's controllers as the dev cluster runs them (decision 0050).
PRINCIPALS = flux_principals()


def repository_object(obj: Mapping[str, Any]) -> dict[str, Any]:
    """An object as it is kept in git: what was declared, without anything the API server added."""
    meta = obj.get("metadata") or {}
    out: dict[str, Any] = {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "metadata": {k: meta[k] for k in ("name", "namespace", "labels", "annotations") if meta.get(k)},
    }
    out.update({k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata", "status")})
    return out


class GitOps:
    """``directory``: the GitOps back-end's directory (its ``git-credentials`` file, re-read by the git
    server per request); ``git_url``: the git server, as the operator (its pushes) and the gateway (the
    agent's requests) reach it; ``flux_url``: the same server as Flux's source-controller reaches it
    (the GitRepositories' URL; in the Helm chart a Service, decision 0072), by default ``git_url``;
    ``flux_namespace``: where Flux's controllers run (their identities are the harness's deputies)."""

    name = registry.GITOPS

    def __init__(
        self,
        http: httpx2.AsyncClient,
        directory: Path,
        git_url: str,
        flux_url: str = "",
        flux_namespace: str = FLUX_NAMESPACE,
        *,
        timeout: float = 60.0,
    ) -> None:
        self.http = http
        self.credentials = directory / CREDENTIALS_FILE
        self.git_url = git_url.rstrip("/")
        self.flux_url = (flux_url or git_url).rstrip("/")
        self.principals = flux_principals(flux_namespace)
        self.timeout = timeout
        self._lock = asyncio.Lock()

    async def inject(self, plan: EnvironmentPlan) -> None:
        for app in plan.toolplane.gitops:
            files = {
                f"{app.path}/{o['kind'].lower()}-{o['metadata']['name']}.yaml": yaml.safe_dump(
                    repository_object(o), sort_keys=False
                )
                for o in app.objects
            }
            # The harness's push: a credential of its own, gone once the commit is there.
            user, password = await self._grant(app.namespace, HARNESS)
            try:
                commit = await asyncio.to_thread(self._push, app, user, password, files)
            finally:
                await self._revoke({app.namespace}, HARNESS)
            # The controller's own credential, fetch only: the agent's is revoked when its turn ends
            # and the settle's fetch must still read what the agent pushed (decision 0069); the agent
            # can read the Secret that holds it, and must not push with it (decision 0090).
            source, kustomization = self._documents(app, *await self._grant(app.namespace, CONTROLLER))
            # The source first, and the Kustomization only once the source serves the pushed commit
            # (decision 0075): created at once, its first reconcile could meet no artifact, or an
            # earlier one, and a failed attempt is retried only an interval later.
            await self._apply(app, source)
            await self._wait(
                app,
                _serves(commit),
                f"serve the pushed commit {commit[:12]}",
                base=GIT_REPOSITORIES,
                retry=_source_behind(commit),
            )
            await self._apply(app, kustomization)
            await self._wait_applied(app, commit)

    async def apply(self, plan: EnvironmentPlan, change: TimedChange) -> None:
        raise ToolPlaneError(f"the GitOps back-end has no timed changes (asked for one at {change.at:g}s)")

    async def endpoint(self, plan: EnvironmentPlan, access: AgentAccess) -> ToolEndpoint | None:
        if not plan.toolplane.gitops:
            return None
        app = plan.toolplane.gitops[0]
        user, password = await self._grant(app.namespace)
        return ToolEndpoint(
            "gitops",
            f"{self.git_url}/{app.namespace}/{app.repo}.git",
            f"{user}:{password}",
            "git over HTTP with this user:password; Flux Kustomizations and GitRepositories "
            f"in {app.namespace} apply the repository to the cluster (readable with your kubeconfig: "
            f"kubectl get kustomizations,gitrepositories -n {app.namespace})",
        )

    async def settle(self, plan: EnvironmentPlan) -> None:
        """The agent's git credential goes, then the controllers are asked to reconcile now, so what
        the repository holds at the end of the turn is what the "after" snapshot shows."""
        await self._revoke({app.namespace for app in plan.toolplane.gitops}, AGENT)
        for app in plan.toolplane.gitops:
            # The source first, then what applies it: asked at once, the Kustomization could reconcile
            # while its source is still fetching, and end the turn on the artifact it had before.
            for base, what in ((GIT_REPOSITORIES, "fetch the repository"), (KUSTOMIZATIONS, "apply it")):
                stamp = await self._request_reconcile(app, base)
                await self._wait(app, _handled(stamp), f"{what} on request", base=base)

    async def probe(self) -> str:
        """The preflight's self-test: the git server answers, its credentials directory is there, and
        the API server serves Flux's GitRepository and Kustomization objects."""
        if not self.credentials.parent.is_dir():
            raise ToolPlaneError(f"the GitOps back-end's directory {self.credentials.parent} is missing")
        try:
            async with httpx2.AsyncClient(timeout=5.0) as git:
                resp = await git.get(f"{self.git_url}/")
        except httpx2.HTTPError as exc:
            raise ToolPlaneError(f"the git server {self.git_url}: {type(exc).__name__}: {exc}") from exc
        if resp.status_code >= 500:
            raise ToolPlaneError(f"the git server {self.git_url} answered HTTP {resp.status_code}")
        sources = await served(self.http, GIT_REPOSITORIES.split("/namespaces/")[0], "gitrepositories")
        kustomizations = await served(self.http, KUSTOMIZATIONS.split("/namespaces/")[0], "kustomizations")
        return f"git server {self.git_url} answers (HTTP {resp.status_code}); {sources}; {kustomizations}"

    async def cleanup(self, plan: EnvironmentPlan) -> None:
        await self._revoke({app.namespace for app in plan.toolplane.gitops})
        # The Flux objects go with the namespace; the repositories stay on the git server's disk.

    async def _revoke(self, namespaces: set[str], role: str = "") -> None:
        """The credentials of ``namespaces`` go: only ``role``'s (the agent's at the end of its turn),
        or all of them."""
        users = {f"{ns}-{role}" for ns in namespaces} if role else None

        def kept(ln: str) -> bool:
            user, _password, ns = [*ln.split(), "", "", ""][:3]
            return ns not in namespaces or (users is not None and user not in users)

        async with self._lock:
            self._write([ln for ln in self._lines() if kept(ln)])

    # -- helpers ----------------------------------------------------------------------------------------
    def _lines(self) -> list[str]:
        try:
            return [ln for ln in self.credentials.read_text().splitlines() if ln.strip()]
        except FileNotFoundError:
            return []

    def _write(self, lines: list[str]) -> None:
        tmp = self.credentials.with_suffix(".tmp")
        tmp.write_text("".join(f"{ln}\n" for ln in lines))
        tmp.chmod(0o600)
        tmp.replace(self.credentials)

    async def _grant(self, namespace: str, role: str = AGENT) -> tuple[str, str]:
        """``role``'s credential (the agent's, the controller's or the harness's push) for
        ``namespace``'s repositories; the controller's fetches only."""
        wanted = f"{namespace}-{role}"
        async with self._lock:
            lines = self._lines()
            for ln in lines:
                user, password, ns = [*ln.split(), "", "", ""][:3]
                if ns == namespace and user == wanted:
                    return user, password
            user, password = wanted, secrets.token_urlsafe(18)
            mode = READ if role == CONTROLLER else WRITE
            self._write([*lines, f"{user} {password} {namespace} {mode}"])
            return user, password

    def _push(self, app: GitOpsApp, user: str, password: str, files: Mapping[str, str]) -> str:
        url = f"{self.git_url}/{app.namespace}/{app.repo}.git".replace("://", f"://{user}:{password}@", 1)
        try:
            return push_tree(url, files, message=f"Deploy {app.name}", timeout=self.timeout)
        except GitFailed as exc:
            raise ToolPlaneError(f"git {exc.command} for {app.source}: {exc.stderr[:300]}") from None

    def _documents(
        self, app: GitOpsApp, user: str, password: str
    ) -> tuple[list[tuple[str, dict[str, Any]]], list[tuple[str, dict[str, Any]]]]:
        """What the cluster gets, in two steps: the credential Secret and the GitRepository; then the
        Kustomization applying the repository."""
        ns, name = app.namespace, app.name
        source = [
            (
                f"/api/v1/namespaces/{ns}/secrets/{name}-git",
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": f"{name}-git", "namespace": ns},
                    "stringData": {"username": user, "password": password},
                },
            ),
            (
                f"{GIT_REPOSITORIES.format(ns=ns)}/{name}",
                {
                    "apiVersion": "source.toolkit.fluxcd.io/v1",
                    "kind": "GitRepository",
                    "metadata": {"name": name, "namespace": ns},
                    "spec": {
                        "url": f"{self.flux_url}/{ns}/{app.repo}.git",
                        "ref": {"branch": "main"},
                        "interval": app.interval,
                        "secretRef": {"name": f"{name}-git"},
                    },
                },
            ),
        ]
        kustomization = [
            (
                f"{KUSTOMIZATIONS.format(ns=ns)}/{name}",
                {
                    "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
                    "kind": "Kustomization",
                    "metadata": {"name": name, "namespace": ns},
                    "spec": {
                        "sourceRef": {"kind": "GitRepository", "name": name},
                        "path": f"./{app.path}",
                        "interval": app.interval,
                        "prune": True,
                        "targetNamespace": ns,
                        # Applied as an account with the agent's rights there (decision 0090).
                        "serviceAccountName": DEPLOYER,
                        "wait": False,
                    },
                },
            ),
        ]
        return source, kustomization

    async def _apply(self, app: GitOpsApp, docs: list[tuple[str, dict[str, Any]]]) -> None:
        for url, doc in docs:
            refused = await server_side_apply(self.http, url, doc, FIELD_MANAGER)
            if refused:
                raise ToolPlaneError(
                    f"{app.source}: applying {doc['kind']} {app.namespace}/{app.name}: {refused}"
                )

    async def _request_reconcile(self, app: GitOpsApp, base: str) -> str:
        """Flux's "reconcile now" (the ``requestedAt`` annotation) on the app's object of ``base``; the
        stamp the controller reports in ``status.lastHandledReconcileAt`` once it has handled it."""
        stamp = f"oasis-{secrets.token_hex(6)}"
        body = json.dumps({"metadata": {"annotations": {REQUESTED_AT: stamp}}})
        resp = await self.http.patch(
            f"{base.format(ns=app.namespace)}/{app.name}",
            content=body,
            headers={"Content-Type": "application/merge-patch+json"},
        )
        if resp.status_code != 200:
            raise ToolPlaneError(f"{app.source}: requesting a reconcile: HTTP {resp.status_code}")
        return stamp

    async def _wait_applied(self, app: GitOpsApp, commit: str) -> None:
        """The Kustomization is Ready with the pushed commit applied, and every object carries the
        controller's label (it, not the provisioner, now manages them)."""
        await self._wait(
            app,
            lambda status, ready: (
                ready.get("status") == "True" and commit in str(status.get("lastAppliedRevision", ""))
            ),
            f"apply commit {commit[:12]}",
            retry=_attempt_failed,
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        while not await self._labelled(app):
            if loop.time() > deadline:
                raise ToolPlaneError(
                    f"{app.source}: the applied objects do not carry the label {APPLIED_LABEL}"
                )
            await asyncio.sleep(0.2)

    async def _wait(
        self,
        app: GitOpsApp,
        done: Callable[[dict[str, Any], dict[str, Any]], bool],
        what: str,
        *,
        base: str = KUSTOMIZATIONS,
        retry: Callable[[dict[str, Any], dict[str, Any]], bool] | None = None,
    ) -> None:
        """Until ``done(status, ready)`` holds for the app's object of ``base`` (its Kustomization, or
        its GitRepository). While ``retry(status, ready)`` holds (the controller finished an attempt
        that did not get there), it is asked to reconcile again once it has handled the previous ask:
        left alone it would try again only at its retry interval, the app's interval (decision 0075)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        last, first_failure, asked, retries = "", "", "", 0
        while loop.time() < deadline:
            resp = await self.http.get(f"{base.format(ns=app.namespace)}/{app.name}")
            status = resp.json().get("status") or {} if resp.status_code == 200 else {}
            ready: dict[str, Any] = next(
                (c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {}
            )
            last = _describe(status, ready)
            if done(status, ready):
                return
            if (
                retry is not None
                and retry(status, ready)
                and (not asked or status.get("lastHandledReconcileAt") == asked)
            ):
                first_failure = first_failure or last
                asked, retries = await self._request_reconcile(app, base), retries + 1
                await asyncio.sleep(min(RETRY_PAUSE * retries, self.timeout / 10))
            await asyncio.sleep(0.2)
        asked_again = (
            f"; asked {retries} times to try again, the first failure: {first_failure}" if retries else ""
        )
        raise ToolPlaneError(
            f"{app.source}: the GitOps controller did not {what} within {self.timeout:g}s ({last}{asked_again})"
        )

    async def _labelled(self, app: GitOpsApp) -> bool:
        for o in app.objects:
            group_version = o["apiVersion"]
            base = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
            resp = await self.http.get(
                f"{base}/namespaces/{app.namespace}/{o['kind'].lower()}s/{o['metadata']['name']}"
            )
            if (
                resp.status_code != 200
                or (resp.json()["metadata"].get("labels") or {}).get(APPLIED_LABEL) != app.name
            ):
                return False
        return True


def _describe(status: dict[str, Any], ready: dict[str, Any]) -> str:
    """The controller's last word, for an error: its Ready condition, and the revision its source
    serves (a GitRepository) or last attempted (a Kustomization)."""
    revision = (status.get("artifact") or {}).get("revision") or status.get("lastAttemptedRevision")
    seen = f"; revision {revision}" if revision else ("; no revision yet" if "artifact" not in status else "")
    message = str(ready.get("message"))[:MESSAGE_CHARS]
    return f"Ready={ready.get('status')} {ready.get('reason')}: {message}{seen}"


def _serves(commit: str) -> Callable[[dict[str, Any], dict[str, Any]], bool]:
    """The GitRepository's artifact is the pushed commit (Flux writes ``<branch>@sha1:<commit>``)."""

    def done(status: dict[str, Any], ready: dict[str, Any]) -> bool:
        revision = str((status.get("artifact") or {}).get("revision", ""))
        return ready.get("status") == "True" and revision.endswith(commit)

    return done


def _source_behind(commit: str) -> Callable[[dict[str, Any], dict[str, Any]], bool]:
    """The source finished a fetch without the pushed commit: it failed, or it serves an earlier one."""

    def behind(status: dict[str, Any], ready: dict[str, Any]) -> bool:
        revision = str((status.get("artifact") or {}).get("revision", ""))
        return ready.get("status") == "False" or (
            ready.get("status") == "True" and not revision.endswith(commit)
        )

    return behind


def _attempt_failed(status: dict[str, Any], ready: dict[str, Any]) -> bool:
    """The Kustomization's last reconcile ended without applying (``Ready=False``): a failed build,
    fetch or apply, or no artifact yet."""
    return ready.get("status") == "False"


def _handled(stamp: str) -> Callable[[dict[str, Any], dict[str, Any]], bool]:
    def done(status: dict[str, Any], ready: dict[str, Any]) -> bool:
        return bool(status.get("lastHandledReconcileAt") == stamp)

    return done


@dataclass(frozen=True)
class GitOpsSettings:
    """``directory``: the GitOps back-end's (its git credentials file); ``git_url``: the git server as
    the operator and the gateway reach it; ``flux_url``: the same server as the cluster's Flux reaches
    it; ``flux_namespace``: where the cluster's Flux controllers run (the last two: one per cluster)."""

    directory: Path
    git_url: str
    flux_url: str
    flux_namespace: str = FLUX_NAMESPACE


def _settings(entry: FileEntry) -> GitOpsSettings:
    """From the entry: endpoints ``git`` and, for Flux, ``flux`` (by default the same), and
    ``flux_namespace`` (by default flux-system; decision 0072)."""
    namespace = entry.fields.get("flux_namespace", FLUX_NAMESPACE)
    if not isinstance(namespace, str) or not namespace:
        raise EntryError("flux_namespace", "a namespace", namespace)
    git = entry.endpoints["git"]
    return GitOpsSettings(entry.root, git, entry.endpoints.get("flux") or git, namespace)


def _prepare(entry: FileEntry, entries: Mapping[str, FileEntry]) -> None:
    """The git server's repositories directory, and its credentials file, which it refuses to start
    without: empty (the operator adds a credential per scenario), and kept when there (those of a
    restarted pod; decision 0072)."""
    (entry.root / REPOSITORIES).mkdir(exist_ok=True)
    (entry.root / CREDENTIALS_FILE).touch(mode=0o600, exist_ok=True)


FACTORY = Factory(
    registry.GITOPS,
    GitOpsSettings,
    build=lambda plane, s: GitOps(plane.cluster.http, s.directory, s.git_url, s.flux_url, s.flux_namespace),
    parse=_settings,
    prepare=_prepare,
)
