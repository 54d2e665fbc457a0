"""Kubeconfig documents, built as values.

Called by the embedded control plane (component and admin kubeconfigs), the environment provider (the
agent's kubeconfig) and the operator's in-cluster start-up; turns a server, a CA (base64 PEM) and one
user's credentials into the single-context kubeconfig document, ready to serialise.
"""

from __future__ import annotations

from typing import Any


def kubeconfig(
    server: str, ca_data: str, user: str, credentials: dict[str, str], namespace: str | None = None
) -> dict[str, Any]:
    """``credentials``: ``{"token": ...}`` or ``{"client-certificate-data": ..., "client-key-data": ...}``."""
    context: dict[str, str] = {"cluster": "cluster", "user": user}
    if namespace:
        context["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "cluster", "cluster": {"server": server, "certificate-authority-data": ca_data}}
        ],
        "users": [{"name": user, "user": dict(credentials)}],
        "contexts": [{"name": "default", "context": context}],
        "current-context": "default",
    }
