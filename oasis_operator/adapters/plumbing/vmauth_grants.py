"""The metrics back-end's grants file: which namespace's bearer token vmauth accepts, shared by the
processes that grant tokens (the operator's metrics adapter, the dev cluster's metrics back-end, the
chart's init container that writes the first one) and rendered into vmauth's configuration on every
change (:func:`~oasis_operator.core.toolplane.metrics.render_auth_config`). The caller makes vmauth
re-read it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from oasis_operator.core.errors import ToolPlaneError
from oasis_operator.core.toolplane.metrics import AUTH_CONFIG, GRANTS_FILE, render_auth_config


class VmauthGrants:
    """The grants file of the metrics back-end's ``directory``: ``{"store": URL, "alerts": URL|null,
    "grants": {namespace: token}}``, changed under a file lock and rendered into vmauth's
    configuration on every change. The caller makes vmauth re-read it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / GRANTS_FILE

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        with (self.directory / f"{GRANTS_FILE}.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                doc: dict[str, Any] = json.loads(self.path.read_text()) if self.path.exists() else {}
            except ValueError as exc:
                raise ToolPlaneError(f"{self.path}: not JSON ({exc})") from None
            doc.setdefault("grants", {})
            before = json.dumps(doc, sort_keys=True)
            yield doc
            if json.dumps(doc, sort_keys=True) != before:
                self._write(self.path, json.dumps(doc, indent=2, sort_keys=True))
                config = render_auth_config(doc["grants"], str(doc.get("store") or ""), doc.get("alerts"))
                self._write(self.directory / AUTH_CONFIG, yaml.safe_dump(config, sort_keys=False))

    @staticmethod
    def _write(path: Path, text: str) -> None:
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text)
        tmp.chmod(0o600)
        tmp.replace(path)

    def set_upstreams(self, store_url: str, alerts_url: str | None) -> None:
        with self._locked() as doc:
            doc["store"], doc["alerts"] = store_url, alerts_url

    def grants(self) -> dict[str, str]:
        with self._locked() as doc:
            return dict(doc["grants"])

    def grant(self, namespace: str) -> tuple[str, bool]:
        """The namespace's token (made if it has none) and whether the configuration changed."""
        with self._locked() as doc:
            token = doc["grants"].get(namespace)
            if token is not None:
                return str(token), False
            token = doc["grants"][namespace] = secrets.token_urlsafe(24)
            return token, True

    def revoke(self, namespace: str) -> bool:
        with self._locked() as doc:
            return doc["grants"].pop(namespace, None) is not None
