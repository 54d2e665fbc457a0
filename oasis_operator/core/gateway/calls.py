"""One call through the recording gateway, as values: how it is classified, how its bodies are recorded,
which headers pass each way, and the rate bound.

- **Classification** (:func:`classify`): the SI operation (``query``, ``list``, ``get``, ``update``...)
  and target of a request, from its interface, method and path, so the capability behaviours can read
  the records without knowing each back-end's API.
- **Bodies** (:func:`body_evidence`): a JSON body is recorded parsed, a UTF-8 text body as text, anything
  else (a git pack) as its size and SHA-256 only; every body also carries its size and digest. The
  gateway refuses a body over its limit rather than record part of it, so what the agent sent or saw is
  always recorded whole.
- **Headers** (:func:`forwarded_request_headers`, :func:`agent_response_headers`): allow lists. Nothing
  of the agent's credentials reaches a back-end, and nothing of a back-end's identity (``Server``,
  ``X-*``, a ``Location`` that would name an internal address) reaches the agent.
- **Path** (:func:`forwarded_path`): the one path a call is classified, withheld, injected and
  recorded on is the one the back-end is sent (decision 0073).
- **Rate** (:class:`Bucket`): a token bucket per route.
- **Withheld fields** (:func:`withheld`): the alerting back-end's listings of rules and alerts lose the
  fields that say how a declared alert is made to fire (its expression, its rule file, the back-end's
  own link), which are the harness's, not the scenario's (decision 0067).

Pure: values in, values out.
"""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Bucket",
    "agent_response_headers",
    "body_evidence",
    "classify",
    "forwarded_path",
    "forwarded_request_headers",
    "upstream_authorization",
    "withheld",
]

#: Request headers passed to a back-end (everything else, Authorization and Cookie first, is dropped).
REQUEST_HEADERS = frozenset(
    {"accept", "content-type", "content-encoding", "git-protocol", "user-agent", "accept-language"}
)
#: Response headers passed to the agent.
RESPONSE_HEADERS = frozenset(
    {"content-type", "cache-control", "expires", "pragma", "etag", "last-modified", "content-disposition"}
)

_LISTINGS = (
    "alerts",
    "rules",
    "series",
    "labels",
    "values",
    "services",
    "operations",
    "targets",
    "dashboards",
    "search",
    "metadata",
)


def forwarded_path(tail: str) -> str:
    """The path (relative to the interface's root, decoded) a call is forwarded to and judged on.

    Dot segments are resolved and empty segments dropped here, never above the interface's root, the
    way a back-end or a proxy in front of it (vmauth cleans its paths) would resolve them; a trailing
    slash is kept. The gateway then sends exactly this path, every character of it a path character
    (a ``?`` or ``#`` in it is percent-encoded, not a query or a fragment), so what the back-end serves
    is what was classified: ``execute%3F/query`` cannot be recorded as a read and reach the writing
    call, and ``api/v1/./rules`` cannot escape the withheld listings (decision 0073)."""
    out: list[str] = []
    segments = tail.split("/")
    for seg in segments:
        if seg == "..":
            if out:
                out.pop()
        elif seg not in ("", "."):
            out.append(seg)
    path = "/".join(out)
    if path and segments[-1] in ("", ".", ".."):
        path += "/"
    return path


def classify(interface: str, method: str, path: str, query: str = "") -> tuple[str, str]:
    """(operation, target) of a call: the SI vocabulary's operation, and ``<type>/<name>`` when known.
    ``query`` is the raw query string (git names the service it advertises there)."""
    parts = [p for p in path.split("/") if p]
    method = method.upper()
    if interface == "database":
        # Only the read-only call is a read (the database's privileges make it one, decision 0066):
        # POST to exactly the endpoint's ``query`` (a trailing slash aside); anything else, whatever its
        # statement, path or method, is counted as a write (decision 0073).
        return ("query", "") if method == "POST" and parts == ["query"] else ("update", "")
    git = _git_call(interface, method, parts, query)
    if git is not None:
        return git
    written = _http_write(method, parts)
    if written is not None:
        return written
    return _http_read(parts)


def _git_call(interface: str, method: str, parts: list[str], query: str) -> tuple[str, str] | None:
    """A call to a git repository (the gitops interface, or a ``.git`` segment): a push is an update,
    a fetch a get; None when it is not one (a POST elsewhere that merely names a ``.git`` segment)."""
    if interface != "gitops" and not any(p.endswith(".git") for p in parts):
        return None
    repo = next((p for p in parts if p.endswith(".git")), "")
    target = f"repository/{repo.removesuffix('.git')}" if repo else ""
    if "git-receive-pack" in parts or "service=git-receive-pack" in query:
        return "update", target
    # On another interface a ".git" segment alone does not make a POST a fetch (decision 0073).
    if interface == "gitops" or method in ("GET", "HEAD") or parts[-1:] == ["git-upload-pack"]:
        return "get", target
    return None


def _http_write(method: str, parts: list[str]) -> tuple[str, str] | None:
    if method in ("POST", "PUT", "PATCH") and not any(p in ("query", "query_range", "search") for p in parts):
        return ("create" if method == "POST" else "update"), ""
    if method == "DELETE":
        return "delete", ""
    return None


def _http_read(parts: list[str]) -> tuple[str, str]:
    if "traces" in parts:
        i = parts.index("traces")
        if i + 1 < len(parts):
            return "get", f"trace/{parts[i + 1]}"
        return "list", "traces"
    if parts and parts[-1] in ("query", "query_range", "query_exemplars"):
        return "query", ""
    last = parts[-1] if parts else ""
    if last in _LISTINGS:
        return "list", last
    return "get", "/".join(parts[-2:]) if parts else ""


def _decoded(raw: bytes, encoding: str, limit: int) -> bytes | None:
    """A gzip/deflate-encoded body decoded, at most ``limit`` bytes (``None``: not decodable or larger)."""
    if encoding in ("", "identity"):
        return raw
    if encoding not in ("gzip", "deflate", "x-gzip"):
        return None
    try:
        d = zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib header
        out = d.decompress(raw, limit + 1)
    except zlib.error:
        return None
    return out if len(out) <= limit and not d.unconsumed_tail else None


def body_evidence(
    raw: bytes, content_type: str = "", content_encoding: str = "", limit: int = 8 << 20, *, keep: bool = True
) -> dict[str, Any]:
    """How a body is recorded: ``bytes`` and ``sha256`` of what passed on the wire, and ``body`` (parsed
    JSON, text, or absent for binary content, with ``binary: true``). ``keep=False`` (the byte budget
    is spent, decision 0096): the size and digest only, with ``over_budget: true``."""
    out: dict[str, Any] = {"bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}
    if not keep and raw:
        out["over_budget"] = True
        return out
    if not raw:
        out["body"] = ""
        return out
    plain = _decoded(raw, content_encoding.strip().lower(), limit)
    if plain is None:
        out["binary"] = True
        return out
    try:
        text = plain.decode()
    except UnicodeDecodeError:
        out["binary"] = True
        return out
    kind = content_type.split(";")[0].strip().lower()
    if kind == "application/json" or kind.endswith("+json"):
        try:
            out["body"] = json.loads(text)
            return out
        except ValueError:
            pass
    if "\x00" in text:
        out["binary"] = True
        return out
    out["body"] = text
    return out


def forwarded_request_headers(
    headers: Iterable[tuple[str, str]], credential: Iterable[tuple[str, str]]
) -> list[tuple[str, str]]:
    """The headers sent to a back-end: the allowed ones of the agent's, then the scenario's credential."""
    out = [(k, v) for k, v in headers if k.lower() in REQUEST_HEADERS]
    out.extend(credential)
    return out


def agent_response_headers(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The headers of a back-end's answer the agent may see."""
    items = headers.items() if isinstance(headers, Mapping) else headers
    return [(k, v) for k, v in items if k.lower() in RESPONSE_HEADERS]


@dataclass(frozen=True, slots=True)
class Bucket:
    """A token bucket: ``tokens`` left at instant ``at`` (seconds, any monotonic origin)."""

    tokens: float
    at: float

    @classmethod
    def full(cls, burst: int, now: float) -> Bucket:
        return cls(float(burst), now)

    def take(self, now: float, rate: float, burst: int) -> tuple[bool, Bucket]:
        """Whether one call may pass at ``now``, and the bucket after it."""
        tokens = min(float(burst), self.tokens + max(0.0, now - self.at) * rate)
        if tokens >= 1.0:
            return True, Bucket(tokens - 1.0, now)
        return False, Bucket(tokens, now)


def upstream_authorization(credential: str) -> str:
    """The ``Authorization`` header the gateway sends a back-end for a tool endpoint's credential:
    ``user:password`` (HTTP Basic's user-id cannot contain a colon, so a colon means a pair, as the git
    server's credentials are) becomes Basic, anything else is a bearer token (vmauth's)."""
    if ":" in credential:
        return "Basic " + base64.b64encode(credential.encode()).decode()
    return f"Bearer {credential}"


#: The interface whose back-end lists the declared alerts, and the listings.
ALERTING_INTERFACE = "observability-metrics"
ALERT_LISTINGS = ("api/v1/rules", "api/v1/alerts")
#: What vmalert's listings carry beyond a declared alert's name, state, labels and times: the rule's
#: expression (``query`` of a rule, ``expression`` of an alert), the path of its rule file, and the
#: link to the back-end's own page. A declared alert has no expression of its own; the one the
#: back-end evaluates to hold the declared state is the harness's.
HARNESS_FIELDS = frozenset({"query", "expression", "file", "source"})


def _without(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without(v) for k, v in value.items() if k not in HARNESS_FIELDS}
    if isinstance(value, list):
        return [_without(v) for v in value]
    return value


def withheld(interface: str, path: str, payload: bytes) -> bytes:
    """``payload`` as the agent may see it: for the alerting listings of the metrics interface, a JSON
    answer without :data:`HARNESS_FIELDS` at any depth; anything else unchanged."""
    if interface != ALERTING_INTERFACE or path.strip("/") not in ALERT_LISTINGS:
        return payload
    try:
        doc = json.loads(payload)
    except ValueError:
        return payload
    return json.dumps(_without(doc), separators=(",", ":")).encode()
