"""A node whose pods are simulated (kwok moves them through their phases) but whose containers' logs
come from really running the container's program: the test's stand-in for a kubelet with a runtime.

Used by tests/operator/test_job_agents.py. :class:`AgentNode` creates a Node (outside the simulated
pool, so only pods without the pool's toleration go there: the Job agents) whose address and kubelet
port point at an HTTPS server in this process. When the API server asks that "kubelet" for a
container's log (``GET /containerLogs/{namespace}/{pod}/{container}``, what ``pods/log`` proxies to),
the server does what a kubelet and a container runtime would have done for that pod:

* the container's files: the ConfigMap volume (the request and the in-cluster kubeconfig) and the
  ServiceAccount token volume (a TokenRequest for the pod's ServiceAccount, bound to the pod, and
  the cluster's CA), written into a scratch directory that stands for the pod's filesystem;
* the in-cluster kubeconfig's two pod paths (``https://kubernetes.default.svc`` and the token
  directory) mapped to the API server's address and that scratch directory;
* the container's program (the image is mapped to a local command) run with the container's
  arguments and environment, its stdout returned as the log.

The agent therefore acts on the cluster as the pod's ServiceAccount, audited like any pod would be.
What is not real: the pod's status (kwok reports it ``Succeeded`` with exit code 0 at once, so an
agent's non-zero exit is not reflected) and the isolation of a container.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import ssl
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx2
from aiohttp import web

from oasis_operator.devcluster.certs import generate_pki

IN_CLUSTER_SERVER = "https://kubernetes.default.svc"
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


class AgentNode:
    """A Node for Job agents, served by this process's "kubelet"."""

    def __init__(
        self,
        admin: httpx2.Client,
        server: str,
        ca_file: Path,
        workdir: Path,
        images: Mapping[str, Sequence[str]],
        name: str,
    ) -> None:
        self.admin = admin
        self.server = server
        self.ca_file = ca_file
        self.workdir = workdir
        self.images = dict(images)
        self.name = name
        self.logs: dict[str, bytes] = {}  # pod uid -> output
        self.ran: list[dict[str, Any]] = []  # what was run, for the test's assertions
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def start(self) -> None:
        pki = generate_pki(self.workdir / "kubelet-pki", dt.datetime.now(dt.UTC))
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(str(pki.serving.cert), str(pki.serving.key))
        app = web.Application()
        app.router.add_get("/containerLogs/{namespace}/{pod}/{container}", self._logs)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=tls)
        await site.start()
        self.port = int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": {"kubernetes.io/hostname": self.name, "kubernetes.io/os": "linux"},
            },
            "spec": {},
            # Created Ready, so the simulator only keeps it alive (its lease) and runs its pods.
            "status": {
                "addresses": [
                    {"type": "Hostname", "address": "127.0.0.1"},
                    {"type": "InternalIP", "address": "127.0.0.1"},
                ],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": self.port}},
                "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "kubelet is posting ready status",
                        "lastHeartbeatTime": now,
                        "lastTransitionTime": now,
                    }
                ],
                "phase": "Running",
            },
        }
        r = self.admin.post("/api/v1/nodes", json=node)
        assert r.status_code == 201, r.text

    async def stop(self) -> None:
        self.admin.delete(f"/api/v1/nodes/{self.name}")
        if self._runner is not None:
            await self._runner.cleanup()

    async def _logs(self, request: web.Request) -> web.Response:
        ns, name = request.match_info["namespace"], request.match_info["pod"]
        pod = await asyncio.to_thread(lambda: self.admin.get(f"/api/v1/namespaces/{ns}/pods/{name}").json())
        uid = pod["metadata"]["uid"]
        if uid not in self.logs:
            self.logs[uid] = await self._run(pod)
        limit = request.query.get("limitBytes")
        body = self.logs[uid][: int(limit)] if limit else self.logs[uid]
        return web.Response(body=body, content_type="text/plain")

    async def _run(self, pod: dict[str, Any]) -> bytes:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        (container,) = pod["spec"]["containers"]
        root = self.workdir / "pods" / pod["metadata"]["uid"]
        sa_dir = root / "serviceaccount"
        sa_dir.mkdir(parents=True)
        # As a kubelet does: a token only where the pod mounts one (the identity Job does not).
        mounted = pod["spec"].get("automountServiceAccountToken", True) is not False
        if mounted:
            token = await asyncio.to_thread(self._token, pod)
            (sa_dir / "token").write_text(token)
            (sa_dir / "ca.crt").write_bytes(self.ca_file.read_bytes())
            (sa_dir / "namespace").write_text(ns)
        mounts = {m["mountPath"]: m for m in container.get("volumeMounts") or []}
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(root)}
        paths: dict[str, str] = {}
        for volume in pod["spec"].get("volumes") or []:
            mount = next((p for p, m in mounts.items() if m["name"] == volume["name"]), None)
            if mount is None or "configMap" not in volume:
                continue
            cm = await asyncio.to_thread(
                lambda v=volume: self.admin.get(
                    f"/api/v1/namespaces/{ns}/configmaps/{v['configMap']['name']}"
                ).json()
            )
            local = root / volume["name"]
            local.mkdir()
            for key, value in (cm.get("data") or {}).items():
                text = value.replace(IN_CLUSTER_SERVER, self.server).replace(SA_DIR, str(sa_dir))
                (local / key).write_text(text)
            paths[mount] = str(local)
        for item in container.get("env") or []:
            value = str(item.get("value", ""))
            for mount, local in paths.items():
                value = value.replace(mount, local)
            env[item["name"]] = value
        command = [*self.images[container["image"]], *container.get("args", [])]
        proc = await asyncio.create_subprocess_exec(
            *command, env=env, cwd=root, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await proc.communicate()
        self.ran.append(
            {
                "pod": f"{ns}/{name}",
                "serviceAccount": pod["spec"].get("serviceAccountName"),
                "token": mounted,
                "args": container.get("args", []),
                "exit": proc.returncode,
                "stderr": err.decode()[-500:],
            }
        )
        return out

    def _token(self, pod: dict[str, Any]) -> str:
        sa = pod["spec"].get("serviceAccountName") or "default"
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "expirationSeconds": 3600,
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pod["metadata"]["name"],
                    "uid": pod["metadata"]["uid"],
                },
            },
        }
        r = self.admin.post(
            f"/api/v1/namespaces/{pod['metadata']['namespace']}/serviceaccounts/{sa}/token", json=body
        )
        assert r.status_code == 201, r.text
        return str(r.json()["status"]["token"])


def reference_agent(persona: str) -> list[str]:
    """The local program that stands for the reference agent's image."""
    return [sys.executable, "-m", "oasis_operator.agents.reference.task", "--persona", persona]


def describe(ran: Sequence[Mapping[str, Any]]) -> str:
    return json.dumps(list(ran), indent=1)[:3000]
