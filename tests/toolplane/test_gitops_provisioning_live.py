"""Provisioning a GitOps application survives what made 1 of 6 chart test runs fail (decision 0075).

The failure: kustomize-controller reported ``BuildFailed ... not a valid directory apps/api-service``
and the injection timed out. The cause, read in kustomize-controller v1.9.6 (``main.go``,
``purgeStaleTempDirs``; ``internal/controller/tmpdir.go``): at start-up the controller deletes every
``$TMPDIR/kustomization-*`` directory, taking it for a previous process's leftover, and it extracts
every artifact it builds into such a directory. Several local stacks (sessions, test workers) shared
``/tmp``, so one stack's controller starting removed another's artifact in the middle of its build;
the controller then retried only at the Kustomization's retry interval (its 1m interval), after the
injection's timeout.

Both halves, on the session cluster's real Flux:

- each controller of the local stack has a temporary directory of its own, so another stack's
  start-up purge cannot reach it;
- the adapter no longer waits out a failed attempt: the artifact directory is removed under the
  running controller exactly as a start-up purge does (the controller frozen while it goes), the
  attempt fails, and the injection still succeeds within a timeout shorter than Flux's retry
  interval, because the adapter asks for a new reconcile.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from oasis_operator.adapters.k8s.client import async_http
from oasis_operator.adapters.toolplane import ToolPlane
from oasis_operator.adapters.toolplane.gitops import GitOps, GitOpsSettings
from oasis_operator.core.environment.naming import owner_value
from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.devcluster import kube
from oasis_operator.handlers.settings import ToolPlaneSettings
from tests.conftest import ClusterHandle
from tests.environments.test_support import CORPUS

pytestmark = pytest.mark.cluster
DRIFT = "infra.safety.sc.drift-introduction-001"
PREFIX = "kustomization-"  # kustomize-controller's TempDirPrefix


def controller(cluster: ClusterHandle, name: str) -> tuple[int, Path]:
    """The session stack's Flux controller ``name``: its pid and its temporary directory."""
    pid = next(c.pid for c in cluster.dev.backends["gitops"].processes if c.name == name)
    environ = dict(
        kv.split("=", 1) for kv in Path(f"/proc/{pid}/environ").read_text().split("\0") if "=" in kv
    )
    return pid, Path(environ.get("TMPDIR") or "/tmp")


def test_each_flux_controller_of_the_stack_has_a_temporary_directory_of_its_own(
    cluster: ClusterHandle,
) -> None:
    settings = ToolPlaneSettings.load(cluster.dev.toolplane_file)
    gitops = settings.of(GitOpsSettings)
    assert gitops is not None
    directory = gitops.directory
    for name in ("source-controller", "kustomize-controller"):
        _pid, tmp = controller(cluster, name)
        # Not the machine's shared one: another stack's kustomize-controller purges kustomization-*
        # there when it starts.
        assert tmp.resolve() != Path("/tmp").resolve(), (name, tmp)
        assert tmp.is_dir(), tmp
        assert tmp.parent == directory, (name, tmp)
        assert tmp.stat().st_mode & 0o077 == 0, oct(tmp.stat().st_mode)
    assert controller(cluster, "source-controller")[1] != controller(cluster, "kustomize-controller")[1]


class Purge(threading.Thread):
    """Waits for kustomize-controller to extract the app's artifact into its temporary directory,
    freezes the controller, deletes that directory (what a kustomize-controller starting with the same
    ``TMPDIR`` does to it) and lets the controller go on: its attempt fails."""

    def __init__(self, pid: int, tmp: Path, relative: str, namespace: str) -> None:
        super().__init__(daemon=True)
        self.pid, self.tmp, self.relative, self.namespace = pid, tmp, relative, namespace
        self.removed: Path | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        known = {p.name for p in self.tmp.iterdir() if p.name.startswith(PREFIX)}
        while not self.stop.is_set() and self.removed is None:
            fresh = [p for p in self.tmp.iterdir() if p.name.startswith(PREFIX) and p.name not in known]
            for d in fresh:
                self._watch(d / self.relative)
                known.add(d.name)
                if self.removed is not None:
                    return
            time.sleep(0.001)

    def _watch(self, manifest: Path) -> None:
        """Until the extracted manifest is there (or its directory gone): then frozen, checked to be
        this app's (the directory may be shared with other stacks), removed, resumed."""
        root = manifest.parents[len(Path(self.relative).parts) - 1]
        deadline = time.monotonic() + 10
        while root.exists() and time.monotonic() < deadline:
            if manifest.exists():
                os.kill(self.pid, signal.SIGSTOP)
                try:
                    text = manifest.read_text()
                    if f"namespace: {self.namespace}" in text:
                        shutil.rmtree(root)
                        self.removed = root
                        return
                    if text.strip():
                        return  # another stack's
                finally:
                    os.kill(self.pid, signal.SIGCONT)
            # not yet written: look again


async def test_a_failed_attempt_of_the_controller_is_retried_within_the_injections_timeout(
    cluster: ClusterHandle, env: Any, admin: Any
) -> None:
    settings = ToolPlaneSettings.load(cluster.dev.toolplane_file)
    gitops = settings.of(GitOpsSettings)
    assert gitops is not None
    directory, git, flux, flux_namespace = (
        gitops.directory,
        gitops.git_url,
        gitops.flux_url,
        gitops.flux_namespace,
    )
    scenario, _ = parse_scenario(CORPUS[DRIFT])
    pid, tmp = controller(cluster, "kustomize-controller")
    async with async_http(cluster.kubeconfig) as http:
        # 30 s: half the Kustomization's interval, which is also the retry interval Flux waits after
        # a failed attempt; the old adapter waited it out and timed out.
        adapter = GitOps(http, directory, git, flux, flux_namespace, timeout=30)
        plane = ToolPlane({"gitops": adapter})
        plan = plan_environment(
            scenario,
            suffix=kube.random_suffix(),
            owner=owner_value("gitops-provisioning", DRIFT),
            backends=plane.backends,
        )
        [app] = plan.toolplane.gitops
        [obj] = app.objects
        relative = f"{app.path}/{obj['kind'].lower()}-{obj['metadata']['name']}.yaml"
        purge = Purge(pid, tmp, relative, app.namespace)
        try:
            await env.provision(plan)
            purge.start()
            started = time.monotonic()
            await plane.inject(plan)
            took = time.monotonic() - started
            purge.stop.set()
            purge.join(5)
            assert purge.removed is not None, "the controller's artifact directory was never caught"
            # The controller's attempt did fail (its event), and was retried well before its interval.
            events = admin.get(f"/api/v1/namespaces/{app.namespace}/events").json()["items"]
            failed = [
                e for e in events if e["involvedObject"]["kind"] == "Kustomization" and e["type"] == "Warning"
            ]
            assert failed, [(e["reason"], e["message"][:200]) for e in events]
            assert took < 30, took
            kustomization = admin.get(
                f"/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/{app.namespace}/kustomizations/{app.name}"
            ).json()
            ready = next(c for c in kustomization["status"]["conditions"] if c["type"] == "Ready")
            assert ready["status"] == "True", kustomization["status"]
        finally:
            purge.stop.set()
            await plane.cleanup(plan)
            await env.teardown(plan.namespaces.values(), plan.owner, timeout=0)
