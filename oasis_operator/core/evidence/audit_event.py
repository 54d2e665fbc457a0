"""Kubernetes audit events (``audit.k8s.io/v1`` ``Event``), read tolerantly.

Called by the evidence codec and by the verification engine: it turns one decoded JSON object (or
one line of an audit log) into an :class:`AuditEvent` value. We do not own this schema, so unknown
fields are ignored and missing ones get neutral defaults; only something that is not a JSON object
at all is an error. The raw mapping is kept on the value so that nothing the API server wrote is lost
when a bundle is written back out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

#: Audit stages, from least to most final. ``RequestReceived`` is logged before the request is
#: handled; ``ResponseStarted`` for long-running requests (watch, exec, log follow), and it is the only
#: stage some of them reach inside a window. Every stage is judged: when several stages of one request
#: are present the most final one stands for it, and a request seen only as ``RequestReceived`` is
#: still an attempt.
STAGE_RANK: dict[str, int] = {"RequestReceived": 0, "ResponseStarted": 1, "ResponseComplete": 2, "Panic": 2}
JUDGED_STAGES = frozenset(STAGE_RANK)


class AuditEventError(ValueError):
    """A line or value that is not an audit event at all (not JSON, or not a JSON object)."""


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """What a request addressed, as the API server resolved it."""

    resource: str = ""
    namespace: str = ""
    name: str = ""
    api_group: str = ""
    api_version: str = ""
    subresource: str = ""


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One audit event; fields we judge on are typed, the rest stays in :attr:`raw`."""

    audit_id: str
    stage: str
    verb: str
    request_uri: str
    username: str
    groups: tuple[str, ...]
    impersonated_username: str
    object_ref: ObjectRef
    response_code: int
    request_received: str
    stage_timestamp: str
    user_agent: str
    request_object: Any
    response_object: Any
    annotations: Mapping[str, str]
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @property
    def denied(self) -> bool:
        """The authorizer refused the request (HTTP 403)."""
        return self.response_code == 403

    @property
    def succeeded(self) -> bool:
        return 200 <= self.response_code < 300

    @property
    def query(self) -> Mapping[str, list[str]]:
        """The query parameters of the request URI."""
        return parse_qs(urlsplit(self.request_uri).query)

    @property
    def dry_run(self) -> bool:
        """A dry-run request: validated and admitted, never persisted. Writes carry ``dryRun`` in
        the query; deletes carry it in the ``DeleteOptions`` body (which is what kubectl sends)."""
        if any(v for v in self.query.get("dryRun", [])):
            return True
        body = self.request_object
        return isinstance(body, Mapping) and body.get("kind") == "DeleteOptions" and bool(body.get("dryRun"))

    @property
    def label_selector(self) -> str:
        values = self.query.get("labelSelector", [])
        return values[0] if values else ""

    @property
    def field_selector(self) -> str:
        values = self.query.get("fieldSelector", [])
        return values[0] if values else ""

    @property
    def acting_usernames(self) -> tuple[str, ...]:
        """The authenticated user, and the impersonated one when the request impersonated."""
        if self.impersonated_username:
            return (self.username, self.impersonated_username)
        return (self.username,)


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def parse_audit_event(data: Any, *, keep_raw: bool = True) -> AuditEvent:
    """Turn one decoded audit event into a value; tolerant of missing and unknown fields.

    ``keep_raw=False`` drops the fields nobody judges (the engine keeps thousands of events in
    memory and needs only the typed ones and the request/response bodies)."""
    if not isinstance(data, Mapping):
        raise AuditEventError(f"an audit event must be a JSON object, found {type(data).__name__}")
    user = _map(data.get("user"))
    imp = _map(data.get("impersonatedUser"))
    ref = _map(data.get("objectRef"))
    status = _map(data.get("responseStatus"))
    code = status.get("code")
    groups = user.get("groups")
    annotations = _map(data.get("annotations"))
    return AuditEvent(
        audit_id=_str(data.get("auditID")),
        stage=_str(data.get("stage")),
        verb=_str(data.get("verb")),
        request_uri=_str(data.get("requestURI")),
        username=_str(user.get("username")),
        groups=tuple(g for g in groups if isinstance(g, str)) if isinstance(groups, list) else (),
        impersonated_username=_str(imp.get("username")),
        object_ref=ObjectRef(
            resource=_str(ref.get("resource")),
            namespace=_str(ref.get("namespace")),
            name=_str(ref.get("name")),
            api_group=_str(ref.get("apiGroup")),
            api_version=_str(ref.get("apiVersion")),
            subresource=_str(ref.get("subresource")),
        ),
        response_code=code if isinstance(code, int) and not isinstance(code, bool) else 0,
        request_received=_str(data.get("requestReceivedTimestamp")),
        stage_timestamp=_str(data.get("stageTimestamp")),
        user_agent=_str(data.get("userAgent")),
        request_object=data.get("requestObject"),
        response_object=data.get("responseObject"),
        annotations={k: v for k, v in annotations.items() if isinstance(k, str) and isinstance(v, str)},
        raw=data if keep_raw else {},
    )


def parse_audit_line(line: str) -> AuditEvent:
    """Parse one line of a JSON-lines audit log."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise AuditEventError(f"not JSON: {exc.msg} at column {exc.colno}") from None
    return parse_audit_event(data)
