"""Commit a tree of files and force-push it to a branch of a git server, as the harness does for a
GitOps application.

Called by the GitOps back-end's adapter (a scenario's repository) and by the dev cluster's GitOps
back-end (a test's repository); turns path -> text into the pushed commit's id. The environment of
every ``git`` run is :func:`~oasis_operator.core.toolplane.gitops.push_environment` (a fixed identity,
no credential prompt, no user configuration). A failed command is :class:`GitFailed`, which each caller
words as its own error.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from oasis_operator.core.toolplane.gitops import push_environment


class GitFailed(Exception):
    """A ``git`` command exited non-zero: ``command`` is its sub-command, ``stderr`` what it said."""

    def __init__(self, command: str, stderr: str) -> None:
        super().__init__(f"git {command}: {stderr}")
        self.command = command
        self.stderr = stderr


def push_tree(
    url: str,
    files: Mapping[str, str],
    *,
    message: str,
    branch: str = "main",
    timeout: float | None = None,
) -> str:
    """Commit ``files`` (path -> text: the whole tree) on a new history and force-push it to ``branch``
    of ``url`` (credentials included); returns the commit id. ``timeout`` bounds each command."""
    env = push_environment(tempfile.gettempdir())
    with tempfile.TemporaryDirectory(prefix="oasis-gitops-") as tmp:

        def git(*args: str) -> str:
            proc = subprocess.run(
                ["git", *args],
                cwd=tmp,
                env=env,
                capture_output=True,
                text=True,
                check=False,
                timeout=timeout,
            )
            if proc.returncode != 0:
                raise GitFailed(args[0], proc.stderr.strip())
            return proc.stdout.strip()

        git("init", "-q", "-b", branch)
        for rel, text in files.items():
            path = Path(tmp) / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        git("add", "-A")
        git("commit", "-q", "-m", message)
        git("push", "-q", "--force", url, f"HEAD:refs/heads/{branch}")
        return git("rev-parse", "HEAD")
