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
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

#: Audit stages, from least to most final. ``RequestReceived`` is logged before the request is
#: handled; ``ResponseStarted`` for long-running requests (watch, exec, log follow), and it is the only
#: stage some of them reach inside a window. Every stage is judged: when several stages of one request
#: are present the most final one stands for it, and a request seen only as ``RequestReceived`` is
#: still an attempt.
STAGE_RANK: dict[str, int] = {"RequestReceived": 0, "ResponseStarted": 1, "ResponseComplete": 2, "Panic": 2}
JUDGED_STAGES = frozenset(STAGE_RANK)
#: Stages after which the API server has handled the request (its outcome and, at a body-logging
#: level, its request body are in the event). ``RequestReceived`` carries neither.
HANDLED_STAGES = frozenset({"ResponseStarted", "ResponseComplete", "Panic"})
#: Audit levels at which the request body is logged (when the client sent one).
BODY_LEVELS = frozenset({"Request", "RequestResponse"})
#: The only value ``dryRun`` may hold (``metav1`` validation rejects anything else).
DRY_RUN_ALL = "All"
#: Verbs whose options (``DeleteOptions``) come from the request body when one was sent.
DELETE_VERBS = frozenset({"delete", "deletecollection"})


_T = TypeVar("_T")


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
    level: str = ""
    response_reason: str = ""
    response_message: str = ""

    @property
    def denied(self) -> bool:
        """The authorizer refused the request (HTTP 403)."""
        return self.response_code == 403

    @property
    def succeeded(self) -> bool:
        return 200 <= self.response_code < 300

    @property
    def handled(self) -> bool:
        """The event was written after the API server handled the request (its outcome is known)."""
        return self.stage in HANDLED_STAGES

    @property
    def body_logged(self) -> bool:
        """The event would hold the request body if the client sent one: a body-logging level and a
        stage after the request was read. ``request_object`` None then means "no body was sent"."""
        return self.level in BODY_LEVELS and self.handled

    @property
    def query(self) -> Mapping[str, list[str]]:
        """The query parameters of the request URI (blank values kept: ``dryRun=`` is a value)."""
        return parse_qs(urlsplit(self.request_uri).query, keep_blank_values=True)

    @property
    def dry_run_requested(self) -> bool | None:
        """Whether the request asked for a dry run, read where the API server reads it: for a
        delete or deletecollection that carried a ``DeleteOptions`` body, from the body (the query
        string is then ignored); otherwise from the ``dryRun`` query parameter. ``None`` when that
        cannot be told (a delete whose body the event does not show) or when the value is one the
        server rejects (anything but ``All``)."""
        if self.verb in DELETE_VERBS:
            if not self.body_logged:
                return None
            body = self.request_object
            if isinstance(body, Mapping):
                return _dry_run_values(body.get("dryRun"))
            if body is not None:
                return None
        return _dry_run_values(self.query.get("dryRun"))

    @property
    def dry_run(self) -> bool:
        """A request the API server treated as a dry run: validated and admitted, never persisted.
        Only when it asked for one in the place the server reads, with the one valid value, and the
        server answered with success. Anything unknown is not a dry run (fail closed)."""
        return self.dry_run_requested is True and self.handled and self.succeeded

    @property
    def impersonation_attempted(self) -> bool:
        """The request tried to act as another identity: granted (``impersonatedUser`` is set) or
        refused (a 403 whose message says the user cannot impersonate)."""
        if self.impersonated_username:
            return True
        return self.denied and "cannot impersonate" in self.response_message

    @property
    def request_key(self) -> tuple[str, str, str, str, str, str]:
        """What every stage of one request shares. The audit id alone is not enough: clients may set
        the ``Audit-ID`` header, so two requests can carry the same one."""
        return (
            self.audit_id,
            self.verb,
            self.request_uri,
            self.username,
            self.impersonated_username,
            self.request_received,
        )

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


def _dry_run_values(values: Any) -> bool | None:
    """``dryRun`` as the server validates it: absent or empty is no dry run, every value ``All`` is
    one, anything else is rejected (``None``)."""
    if values is None:
        return False
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        return None
    if not values:
        return False
    return True if all(v == DRY_RUN_ALL for v in values) else None


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def parse_audit_event(
    data: Any, *, keep_raw: bool = True, shared: dict[Any, Any] | None = None
) -> AuditEvent:
    """Turn one decoded audit event into a value; tolerant of missing and unknown fields.

    ``keep_raw=False`` drops the fields nobody judges (the engine keeps thousands of events in
    memory and needs only the typed ones and the request/response bodies). ``shared``: a table
    through which equal field values (users, URIs, object references, annotations, times) are kept
    once across the events parsed with it; the caller bounds it."""
    if not isinstance(data, Mapping):
        raise AuditEventError(f"an audit event must be a JSON object, found {type(data).__name__}")
    user = _map(data.get("user"))
    imp = _map(data.get("impersonatedUser"))
    ref = _map(data.get("objectRef"))
    status = _map(data.get("responseStatus"))
    code = status.get("code")
    groups = user.get("groups")
    annotations = _map(data.get("annotations"))
    one = _Sharing(shared)
    return AuditEvent(
        audit_id=_str(data.get("auditID")),
        stage=one(_str(data.get("stage"))),
        verb=one(_str(data.get("verb"))),
        request_uri=one(_str(data.get("requestURI"))),
        username=one(_str(user.get("username"))),
        groups=one(tuple(g for g in groups if isinstance(g, str))) if isinstance(groups, list) else (),
        impersonated_username=one(_str(imp.get("username"))),
        object_ref=one(
            ObjectRef(
                resource=_str(ref.get("resource")),
                namespace=_str(ref.get("namespace")),
                name=_str(ref.get("name")),
                api_group=_str(ref.get("apiGroup")),
                api_version=_str(ref.get("apiVersion")),
                subresource=_str(ref.get("subresource")),
            )
        ),
        response_code=code if isinstance(code, int) and not isinstance(code, bool) else 0,
        request_received=one(_str(data.get("requestReceivedTimestamp"))),
        stage_timestamp=one(_str(data.get("stageTimestamp"))),
        user_agent=one(_str(data.get("userAgent"))),
        request_object=data.get("requestObject"),
        response_object=data.get("responseObject"),
        annotations=one.mapping(
            {k: v for k, v in annotations.items() if isinstance(k, str) and isinstance(v, str)}
        ),
        raw=data if keep_raw else {},
        level=one(_str(data.get("level"))),
        response_reason=one(_str(status.get("reason"))),
        response_message=one(_str(status.get("message"))),
    )


class _Sharing:
    """Equal values kept once through a caller's table (or not at all, without one)."""

    def __init__(self, table: dict[Any, Any] | None) -> None:
        self.table = table

    def __call__(self, value: _T) -> _T:
        if self.table is None:
            return value
        kept: _T = self.table.setdefault(value, value)
        return kept

    def mapping(self, value: dict[str, str]) -> Mapping[str, str]:
        if self.table is None or not value:
            return value
        kept: Mapping[str, str] = self.table.setdefault(("annotations", *value.items()), value)
        return kept


def parse_audit_line(line: str) -> AuditEvent:
    """Parse one line of a JSON-lines audit log."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise AuditEventError(f"not JSON: {exc.msg} at column {exc.colno}") from None
    return parse_audit_event(data)
