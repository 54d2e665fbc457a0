"""Raw Kubernetes API access for the red-team persona: any method, body, content type and header.

Called by the techniques (``techniques``) once per scenario request. It turns the kubeconfig the
request hands over into an HTTP client that authenticates as that principal, as any other bearer
token the persona gets hold of, or as nobody at all (an anonymous request), and records every
request it makes in a journal (method, path, query, status, as whom) so a test can tell what the
persona really did. Like the rest of the reference agents it imports nothing from the operator.
"""

from __future__ import annotations

import base64
import json
import ssl
import time
from dataclasses import dataclass, field
from typing import Any

import httpx2
import yaml

__all__ = ["Journal", "Kube", "Reply", "decode_jwt_claims"]


@dataclass
class Journal:
    """What the persona did for one scenario request, in order."""

    steps: list[dict[str, Any]] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)

    def step(self, **entry: Any) -> None:
        self.steps.append({"t": round(time.monotonic() - self.started, 3), **entry})


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any  # decoded JSON, or the text when it is not JSON
    headers: dict[str, str]

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def get(self, *path: str, default: Any = None) -> Any:
        """A nested field of a JSON object body (``reply.get("metadata", "uid")``)."""
        node = self.body
        for part in path:
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node


def decode_jwt_claims(token: str) -> dict[str, Any]:
    """The claims of a JWT, unverified (what anyone holding the token can read)."""
    try:
        payload = token.split(".")[1]
        decoded = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
        claims = json.loads(decoded)
    except (IndexError, ValueError):
        return {}
    return claims if isinstance(claims, dict) else {}


class Kube:
    """One principal's view of the API server (a bearer token, or none: anonymous)."""

    def __init__(
        self,
        server: str,
        ca_pem: str,
        token: str | None,
        journal: Journal,
        *,
        who: str = "agent",
        timeout: float = 10.0,
        kubeconfig: dict[str, Any] | None = None,
        cert: tuple[str, str] | None = None,
    ) -> None:
        self.server = server
        self.ca_pem = ca_pem
        self.token = token
        self.journal = journal
        self.who = who
        self.timeout = timeout
        self.kubeconfig = kubeconfig or {}
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx2.AsyncClient(
            base_url=server,
            verify=ssl.create_default_context(cadata=ca_pem),
            headers=headers,
            timeout=httpx2.Timeout(timeout),
            trust_env=False,
            cert=cert,
        )

    @classmethod
    def from_kubeconfig(cls, text: str, journal: Journal, timeout: float = 10.0) -> Kube:
        doc = yaml.safe_load(text)
        ctx = next(c["context"] for c in doc["contexts"] if c["name"] == doc["current-context"])
        cluster = next(c["cluster"] for c in doc["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in doc["users"] if u["name"] == ctx["user"])
        ca_pem = base64.b64decode(cluster["certificate-authority-data"]).decode()
        return cls(cluster["server"], ca_pem, user.get("token"), journal, timeout=timeout, kubeconfig=doc)

    def as_token(self, token: str | None, who: str) -> Kube:
        """The same server as another principal (``token=None``: anonymous)."""
        return Kube(self.server, self.ca_pem, token, self.journal, who=who, timeout=self.timeout)

    def anonymous(self) -> Kube:
        return self.as_token(None, "anonymous")

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Kube:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def call(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | list[tuple[str, str]] | None = None,
        body: Any = None,
        content: str | bytes | None = None,
        content_type: str | None = None,
        headers: dict[str, str] | None = None,
        note: str = "",
    ) -> Reply:
        """One request. ``body`` is sent as JSON (``content_type`` defaults to JSON, or to a merge
        patch for PATCH); ``content`` is sent as is. Transport errors come back as status 0."""
        sent: dict[str, str] = dict(headers or {})
        data: bytes | None = None
        if body is not None:
            data = json.dumps(body).encode()
            sent.setdefault(
                "Content-Type",
                content_type or ("application/merge-patch+json" if method == "PATCH" else "application/json"),
            )
        elif content is not None:
            data = content.encode() if isinstance(content, str) else content
            if content_type:
                sent["Content-Type"] = content_type
        try:
            resp = await self._http.request(
                method,
                path,
                params=params,  # type: ignore[arg-type]
                content=data,
                headers=sent,
            )
        except httpx2.HTTPError as exc:
            self.journal.step(
                who=self.who,
                method=method,
                path=path,
                params=_flat(params),
                status=0,
                error=f"{type(exc).__name__}: {exc}"[:200],
                note=note,
            )
            return Reply(0, None, {})
        try:
            decoded: Any = resp.json()
        except ValueError:
            decoded = resp.text
        self.journal.step(
            who=self.who,
            method=method,
            path=path,
            params=_flat(params),
            status=resp.status_code,
            **({"audit_id": sent["Audit-ID"]} if "Audit-ID" in sent else {}),
            **({"note": note} if note else {}),
        )
        return Reply(resp.status_code, decoded, dict(resp.headers))

    # Shorthands -----------------------------------------------------------------------------------
    async def get(self, path: str, **kw: Any) -> Reply:
        return await self.call("GET", path, **kw)

    async def items(self, path: str, **kw: Any) -> list[dict[str, Any]]:
        reply = await self.call("GET", path, **kw)
        found = reply.get("items", default=[])
        return [i for i in found if isinstance(i, dict)] if isinstance(found, list) else []

    async def post(self, path: str, body: Any, **kw: Any) -> Reply:
        return await self.call("POST", path, body=body, **kw)

    async def patch(self, path: str, body: Any, **kw: Any) -> Reply:
        return await self.call("PATCH", path, body=body, **kw)

    async def delete(self, path: str, **kw: Any) -> Reply:
        return await self.call("DELETE", path, **kw)


def _flat(params: dict[str, Any] | list[tuple[str, str]] | None) -> dict[str, Any] | None:
    if params is None:
        return None
    if isinstance(params, dict):
        return dict(params)
    out: dict[str, Any] = {}
    for k, v in params:
        out.setdefault(k, []).append(v)
    return out
