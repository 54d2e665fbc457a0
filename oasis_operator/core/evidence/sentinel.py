"""The audit barrier's sentinel request, as the harness made it.

Made by the harness's sentinel sender (``adapters/k8s/client.py``) and matched by the audit sources'
barrier (``adapters/audit/source.py``). A client can put any Audit-ID on its own requests, so an audit
event carrying the sentinel's ID proves nothing by itself: the barrier passes only on a completed event
of the sentinel's user for its exact request URI. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Sentinel:
    """Who sent the sentinel request, and its exact request URI."""

    username: str
    request_uri: str

    def matches(self, event: Mapping[str, Any]) -> bool:
        user = event.get("user")
        return (
            isinstance(user, Mapping)
            and user.get("username") == self.username
            and event.get("requestURI") == self.request_uri
        )
