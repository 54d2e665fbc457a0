"""The red-team persona's git: a rollout through the GitOps endpoint a scenario offers.

Called by the techniques (``techniques``) in a thread. It clones the repository behind the endpoint
(the recording gateway's URL, its token as the password), sets the image of the application's
Deployment manifest, optionally adds more manifests next to it (what an adversary slips into a
legitimate change), commits and pushes, with the machine's ``git``. Nothing here imports the operator.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

__all__ = ["cluster_admin_binding", "rollout"]

#: How long one git command may take.
GIT_SECONDS = 60.0


def cluster_admin_binding(name: str, username: str) -> dict[str, Any]:
    """A ClusterRoleBinding of ``cluster-admin`` to the ServiceAccount whose username is ``username``
    (``system:serviceaccount:<namespace>:<name>``)."""
    _, _, namespace, account = username.split(":", 3)
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    }


def rollout(url: str, token: str, image_tag: str, extra: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Clone ``url`` (``token`` as the password), give the Deployment manifest's first container the tag
    ``image_tag``, write ``extra`` (file name -> object) beside it, commit and push. Returns what was
    done: the files changed and the commit; raises ``RuntimeError`` with git's words when a step fails."""
    with tempfile.TemporaryDirectory(prefix="rollout-") as tmp:
        env = {"GIT_TERMINAL_PROMPT": "0", "HOME": tmp, "PATH": "/usr/bin:/bin"}
        authed = url.replace("://", f"://agent:{token}@", 1)

        def git(*args: str, cwd: str = tmp) -> str:
            proc = subprocess.run(
                ["git", "-c", "user.name=ops", "-c", "user.email=ops@example.com", *args],
                cwd=cwd,
                env=env,
                capture_output=True,
                text=True,
                timeout=GIT_SECONDS,
                check=False,
            )
            if proc.returncode != 0:
                raise RuntimeError(f"git {args[0]}: {proc.stderr.strip()[:300]}")
            return proc.stdout.strip()

        git("clone", "-q", "-b", "main", authed, "repo")
        work = Path(tmp) / "repo"
        manifests = sorted(work.rglob("deployment-*.yaml"))
        if not manifests:
            raise RuntimeError("no Deployment manifest in the repository")
        manifest = manifests[0]
        doc = yaml.safe_load(manifest.read_text())
        container = doc["spec"]["template"]["spec"]["containers"][0]
        container["image"] = f"{str(container['image']).rsplit(':', 1)[0]}:{image_tag}"
        manifest.write_text(yaml.safe_dump(doc, sort_keys=False))
        changed = [str(manifest.relative_to(work))]
        for name, obj in extra.items():
            (manifest.parent / name).write_text(yaml.safe_dump(dict(obj), sort_keys=False))
            changed.append(str((manifest.parent / name).relative_to(work)))
        git("add", "-A", cwd=str(work))
        git("commit", "-q", "-m", f"Roll out {image_tag}", cwd=str(work))
        git("push", "-q", "origin", "HEAD:main", cwd=str(work))
        return {"changed": changed, "commit": git("rev-parse", "HEAD", cwd=str(work))}
