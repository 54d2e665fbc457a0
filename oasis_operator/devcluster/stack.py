"""The whole local stack on the embedded control plane: CRDs, an imported profile, reference agents and
the operator, each as a real client or process.

Called by ``oasis demo`` and the end-to-end tests; turns a running :class:`DevCluster` into an
installation an EvaluationRun can be applied to, and waits for runs the way ``kubectl wait
--for=condition=Completed`` does.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx2
import yaml

from oasis_operator.adapters.k8s import peering
from oasis_operator.core.environment.manifests import POOL_LABEL
from oasis_operator.core.model.crd import all_crds
from oasis_operator.devcluster.errors import SetupError
from oasis_operator.devcluster.processes import Supervisor

REPO_ROOT = Path(__file__).resolve().parents[2]
#: Where a checkout of the OASIS spec is expected when nothing else is said (a sibling of this repository).
SI_PROFILE_DIR = REPO_ROOT.parent / "shared" / "oasis-spec" / "profiles" / "software-infrastructure"
#: The setting that says where the SI profile is: a directory, an archive or a Git URL.
SI_PROFILE_ENV = "OASIS_SI_PROFILE"
#: Where the official profiles live in the spec's repository.
SI_PROFILE_PATH = "profiles/software-infrastructure"
APPLY = {"Content-Type": "application/apply-patch+yaml"}
PLURALS = {"Profile": "profiles", "Scenario": "scenarios", "EvaluationRun": "evaluationruns"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def install_crds(http: httpx2.Client, timeout: float = 30) -> list[str]:
    """Our CRDs, generated from the models as ``crds/`` is (so an installed wheel has them too; decision
    0108), and kopf's peering CRDs (the guard of ``--peering``: decision 0114), server-side applied and
    Established."""
    ours = [(f"crds/{name}", crd) for name, crd in sorted(all_crds().items())]
    guard = [(f"oasis_operator.adapters.k8s/{peering.CRD_FILE}", crd) for crd in peering.crds()]
    return _install(http, ours + guard, timeout)


def install_crd_files(http: httpx2.Client, paths: Iterable[Path], timeout: float = 30) -> list[str]:
    """Server-side apply each CRD file and wait until every one is Established."""
    return _install(http, [(str(path), yaml.safe_load(path.read_text())) for path in paths], timeout)


def _install(http: httpx2.Client, docs: list[tuple[str, dict[str, Any]]], timeout: float) -> list[str]:
    """Server-side apply each (source, CRD) and wait until every one is Established."""
    names = []
    for path, doc in docs:
        name = doc["metadata"]["name"]
        r = http.patch(
            f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}",
            params={"fieldManager": "oasis-installer", "force": "true"},
            content=json.dumps(doc),
            headers=APPLY,
        )
        if r.status_code not in (200, 201):
            raise SetupError(f"installing CRD {name} from {path}: HTTP {r.status_code}: {r.text[:500]}")
        names.append(name)
    deadline = time.monotonic() + timeout
    for name in names:
        while True:
            crd = http.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}").json()
            conds = (crd.get("status") or {}).get("conditions") or []
            if any(c["type"] == "Established" and c["status"] == "True" for c in conds):
                break
            if time.monotonic() > deadline:
                raise SetupError(f"CRD {name} not Established after {timeout}s")
            time.sleep(0.1)
    return names


def apply(http: httpx2.Client, doc: dict[str, Any], namespace: str) -> dict[str, Any]:
    """Server-side apply one oasis.dev object (or a core v1 Namespace/Secret) into ``namespace``."""
    kind = doc["kind"]
    name = doc["metadata"]["name"]
    doc = {**doc, "metadata": {**doc["metadata"], "namespace": namespace}}
    if kind in PLURALS:
        path = f"/apis/oasis.dev/v1alpha1/namespaces/{namespace}/{PLURALS[kind]}/{name}"
    else:
        raise SetupError(f"cannot apply kind {kind}")
    r = http.patch(
        path,
        params={"fieldManager": "oasis-installer", "force": "true"},
        content=json.dumps(doc),
        headers=APPLY,
    )
    if r.status_code not in (200, 201):
        raise SetupError(f"applying {kind}/{name}: HTTP {r.status_code}: {r.text[:800]}")
    out: dict[str, Any] = r.json()
    return out


def ensure_namespace(http: httpx2.Client, name: str) -> None:
    r = http.post("/api/v1/namespaces", json={"metadata": {"name": name}})
    if r.status_code not in (201, 409):
        raise SetupError(f"creating namespace {name}: HTTP {r.status_code}")


def si_profile(
    workdir: Path, source: str | None = None, *, ref: str | None = None, path: str | None = None
) -> Path:
    """The SI profile's directory: from ``source`` (a directory, an archive or a Git URL), else from
    ``$OASIS_SI_PROFILE``, else the spec checkout next to this repository; fetched or unpacked under
    ``workdir``. Missing everywhere: a :class:`SetupError` that says what to do."""
    from oasis_operator.loading.profile_source import ProfileSourceError, materialize

    chosen = source or os.environ.get(SI_PROFILE_ENV)
    if not chosen:
        if SI_PROFILE_DIR.is_dir():
            return SI_PROFILE_DIR
        raise SetupError(
            f"the Software Infrastructure profile was not found at {SI_PROFILE_DIR}. Say where it is with "
            f"--profile SOURCE or {SI_PROFILE_ENV}=SOURCE, where SOURCE is the profile's directory, an archive "
            f"of the OASIS spec, or the spec's Git URL (the profile is at {SI_PROFILE_PATH} in it), e.g. "
            f"{SI_PROFILE_ENV}=/path/to/oasis-spec/{SI_PROFILE_PATH}"
        )
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        return materialize(chosen, workdir, ref=ref, path=path)
    except ProfileSourceError as exc:
        origin = "--profile" if source else f"${SI_PROFILE_ENV}"
        raise SetupError(f"{origin}: {exc}") from exc


def import_si_profile(
    http: httpx2.Client, namespace: str, profile_dir: Path = SI_PROFILE_DIR
) -> list[dict[str, Any]]:
    from oasis_operator.loading.profile_dir import import_profile, manifests

    docs = manifests(import_profile(profile_dir))
    for doc in docs:
        apply(http, doc, namespace)
    return docs


class Processes:
    """Reference agents and the operator as child processes, stopped together."""

    def __init__(self, log_dir: Path, tie_to_parent: bool = True) -> None:
        self.sup = Supervisor(log_dir, tie_to_parent=tie_to_parent)

    def agent(self, persona: str, port: int | None = None, name: str | None = None) -> str:
        port = port or free_port()
        comp = self.sup.start(
            name or f"agent-{persona}",
            [
                sys.executable,
                "-m",
                "oasis_operator.agents.reference.server",
                "--persona",
                persona,
                "--port",
                str(port),
            ],
        )
        url = f"http://127.0.0.1:{port}/"
        self.sup.wait_until(
            lambda: httpx2.get(url + "identity-and-configuration", timeout=1).status_code == 200,
            what=f"reference agent {persona}",
            timeout=30,
            owner=comp,
        )
        return url

    def operator(
        self,
        kubeconfig: Path,
        audit_log: Path,
        metrics_port: int | None = None,
        env: dict[str, str] | None = None,
        namespaces: Iterable[str] = (),
        name: str = "operator",
        extra_args: Iterable[str] = (),
        cluster_scoped: bool = True,
        local_agents: bool = True,
    ) -> int:
        """Start the operator; ``kubeconfig`` should be the cluster's operator identity. Scenario pods
        go to the simulated pool, as the chart configures it. ``local_agents``: HTTP agents may be
        served on this machine (the local stack's agents are; decision 0099)."""
        port = metrics_port or free_port()
        pool = ",".join(f"{k}={v}" for k, v in POOL_LABEL.items())
        argv = [
            sys.executable,
            "-m",
            "oasis_operator.cli",
            "operator",
            "run",
            "--kubeconfig",
            str(kubeconfig),
            "--audit-log",
            str(audit_log),
            "--metrics-port",
            str(port),
            "--node-selector",
            pool,
            # The embedded cluster's operator identity may write cluster-scoped objects.
            *(["--cluster-scoped-scenarios"] if cluster_scoped else []),
            *(["--allow-local-agent-endpoints"] if local_agents else []),
            *extra_args,
        ]
        for ns in namespaces:
            argv += ["--namespace", ns]
        comp = self.sup.start(name, env=env, argv=argv)
        self.sup.wait_until(
            lambda: httpx2.get(f"http://127.0.0.1:{port}/metrics", timeout=1).status_code == 200,
            what="the operator's metrics endpoint",
            timeout=60,
            owner=comp,
        )
        return port

    def kill(self, name: str) -> None:
        """SIGKILL a process group at once (no cleanup: a crash)."""
        import os
        import signal

        for c in [c for c in self.sup.components if c.name == name]:
            os.killpg(c.pid, signal.SIGKILL)
            c.process.wait(10)
            self.sup.components.remove(c)

    def stop(self, names: Iterable[str] | None = None) -> None:
        if names is None:
            self.sup.stop_all()
            return
        from oasis_operator.devcluster.processes import terminate

        for c in [c for c in self.sup.components if c.name in set(names)]:
            terminate(c.pid, c.process)
            self.sup.components.remove(c)


def evaluation_run(
    name: str,
    agent_url: str,
    *,
    profile: str = "oasis-profile-software-infrastructure",
    classification: str | None = "safety",
    parallelism: int = 8,
    tier: int = 1,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "oasis.dev/v1alpha1",
        "kind": "EvaluationRun",
        "metadata": {"name": name},
        "spec": {
            "profileRef": {"name": profile},
            "scenarios": {
                "selector": {
                    "matchLabels": {
                        **(
                            {"oasis.dev/classification": classification}
                            if classification
                            else {"oasis.dev/profile": profile}
                        ),
                        **(labels or {}),
                    }
                }
            },
            "agent": {"adapter": "http", "endpoint": agent_url},
            "tier": tier,
            "parallelism": parallelism,
            "timeouts": {"agentResponse": "60s"},
            # The dev cluster does not meet every SI requirement (simulated nodes enforce no
            # NetworkPolicy; some state kinds are not realised): without the opt-in the run would
            # not start (decision 0105). Its result is incomplete and claims nothing.
            "incomplete": True,
        },
    }


def wait_completed(http: httpx2.Client, namespace: str, name: str, timeout: float) -> dict[str, Any]:
    """Poll until ``Completed=True`` (what ``kubectl wait --for=condition=Completed`` waits for)."""
    deadline = time.monotonic() + timeout
    run: dict[str, Any] = {}
    while time.monotonic() < deadline:
        run = http.get(f"/apis/oasis.dev/v1alpha1/namespaces/{namespace}/evaluationruns/{name}").json()
        conds = (run.get("status") or {}).get("conditions") or []
        if any(c["type"] == "Completed" and c["status"] == "True" for c in conds):
            return run
        time.sleep(0.5)
    raise TimeoutError(
        f"EvaluationRun {namespace}/{name} not Completed after {timeout}s: "
        f"{json.dumps((run.get('status') or {}).get('summary'))}"
    )
