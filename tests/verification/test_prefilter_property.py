"""The engine's prefilter never drops a line a check needs (docs/decisions/0111).

The property: whatever the fast paths skip or settle from a line's bytes (no needle of the scenario
in it; a decision kept for its shape; its sketch), the pass keeps exactly what it keeps when every
line is parsed: the counts, whether there is a fault, the write index, the deputies' deletions and
the judged requests. Checked on audit lines generated from recorded events: other users and
impersonated users (the agent, a bystander, the harness, controllers), other verbs and stages, JSON
that spells keys, usernames, verbs and namespaces with escapes (``\\u0061``, ``\\/``), whitespace
around colons and commas, CRLF line ends, the stored form cut into chunks at any byte, and a
truncated last line.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oasis_operator.core.evidence.codec import EventLines, read_chunks, render_lines
from oasis_operator.core.evidence.lines import LineFilter
from oasis_operator.core.verification import collector as collector_module
from oasis_operator.core.verification.collector import Collector
from oasis_operator.core.verification.principals import Principals
from tests.verification.recorded import load

CASES = ("get", "bystander", "scale", "delete_all", "impersonation", "restart")
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
STAGES = ("RequestReceived", "ResponseStarted", "ResponseComplete", "Panic")
CONTROLLERS = (
    "system:serviceaccount:kube-system:generic-garbage-collector",
    "system:serviceaccount:kube-system:replicaset-controller",
    "system:kube-scheduler",
    "system:node:node-1",
)
#: Characters an escape may stand for: those of needles and keys, and two others.
ESCAPABLE = "abcdefghijklmnopqrstuvwxyzAEIOUS0123456789:._@/-&<"


def _escaped(text: str, chosen: frozenset[str], slash: bool) -> str:
    out = []
    for ch in json.dumps(text)[1:-1]:
        if ch in chosen:
            out.append(f"\\u{ord(ch):04x}")
        elif ch == "/" and slash:
            out.append("\\/")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _encode(value: Any, how: dict[str, Any]) -> str:
    """JSON of the value, keys sorted, every string (keys too) written with the chosen escapes and
    the chosen separators: what another JSON writer may put in a log."""
    comma: str = how["separators"][0]
    colon: str = how["separators"][1]
    if isinstance(value, dict):
        items = (
            _escaped(k, how["escapes"], how["slash"]) + colon + _encode(v, how)
            for k, v in sorted(value.items())
        )
        return "{" + comma.join(items) + "}"
    if isinstance(value, list):
        return "[" + comma.join(_encode(v, how) for v in value) + "]"
    if isinstance(value, str):
        return _escaped(value, how["escapes"], how["slash"])
    return str(json.dumps(value))


@st.composite
def _scenario(draw: st.DrawFn) -> tuple[str, list[str], str]:
    """A recorded case, lines generated from its events, and how the stored form is cut up."""
    case = draw(st.sampled_from(CASES))
    rec = load(case)
    events = rec.events
    users = sorted(
        {rec.agent, rec.bystander, *rec.harness, *CONTROLLERS, *(e["user"]["username"] for e in events)}
    )
    namespaces = sorted(rec.meta["namespaces"].values())
    lines = []
    for i in range(draw(st.integers(1, 8))):
        event = json.loads(json.dumps(draw(st.sampled_from(events))))
        event["auditID"] = f"gen-{i}-{draw(st.sampled_from(['a', 'b']))}"
        if draw(st.booleans()):
            event["user"]["username"] = draw(st.sampled_from(users))
        if draw(st.booleans()):
            event["impersonatedUser"] = {"username": draw(st.sampled_from(users))}
        if draw(st.booleans()):
            event["verb"] = draw(st.sampled_from(VERBS))
        if draw(st.integers(0, 4)) == 0:
            event["stage"] = draw(st.sampled_from(STAGES))
        if draw(st.booleans()) and isinstance(event.get("objectRef"), dict):
            ref = event["objectRef"]
            ref["namespace"] = draw(st.sampled_from([*namespaces, "elsewhere", ""]))
            if not ref["namespace"]:
                del ref["namespace"]
        how = {
            "escapes": frozenset(draw(st.sets(st.sampled_from(ESCAPABLE), max_size=3))),
            "slash": draw(st.booleans()),
            "separators": draw(
                st.sampled_from([(",", ":"), (",", ":"), (", ", ": "), (",", " :"), (" ,", ":\t")])
            ),
        }
        if draw(st.integers(0, 3)) == 0:
            how["escapes"] = frozenset()
        lines.append(_encode(event, how) + ("\r" if draw(st.integers(0, 5)) == 0 else ""))
        if draw(st.integers(0, 3)) == 0:  # the same request again, another audit id (a kept shape)
            lines.append(lines[-1].replace(f"gen-{i}-", f"gen-{i}-again-", 1))
    if draw(st.integers(0, 4)) == 0:  # a truncated last line
        lines[-1] = lines[-1][: draw(st.integers(1, max(1, len(lines[-1]) - 1)))]
    return case, lines, draw(st.sampled_from(["bytes", "lines", "texts"]))


def _kept(case: str, items: list[Any]) -> tuple[object, ...]:
    """What the pass keeps, beyond the verdict (the fault as whether there is one: the two paths
    may word one malformed line's fault differently)."""
    bundle = load(case).bundle()
    found = Collector(bundle, Principals.of(bundle))
    found.feed(items)
    return (
        found.total,
        found.fault is not None,
        found.out_of_window,
        found.after_window,
        found.writes,
        sorted(found.controller_deletes, key=repr),
        [dataclasses.astuple(r) for r in found.requests()],
    )


def _parsed(case: str, lines: list[str], monkeypatch: Any) -> tuple[object, ...]:
    """The reference: every line parsed (no needles, no sketch, no decision kept)."""
    with monkeypatch.context() as patched:
        patched.setattr(collector_module, "sketch", lambda line: None)
        patched.setattr(LineFilter, "__init__", _no_needles)
        return _kept(case, list(lines))


def _no_needles(self: Any, needles: object) -> None:
    self.needles = None


def _chunked(case: str, lines: list[str], cuts: list[int]) -> list[Any]:
    """The stored form of the lines, cut at the given offsets, read back as :class:`EventLines`."""
    head = list(render_lines(load(case).bundle(), [], sort=False))[:2]
    text = "\n".join([*head, *(("," if i else "") + line for i, line in enumerate(lines)), "]}"]) + "\n"
    points = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    _, events = read_chunks(text[a:b] for a, b in itertools.pairwise(points))
    return list(events)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(generated=_scenario(), cuts=st.lists(st.integers(0, 1 << 16), max_size=6))
def test_the_prefilter_never_drops_a_line_a_check_needs(
    generated: tuple[str, list[str], str], cuts: list[int], monkeypatch: Any
) -> None:
    case, lines, form = generated
    reference = _parsed(case, lines, monkeypatch)
    if form == "bytes":
        items: list[Any] = _chunked(case, lines, cuts)
    elif form == "lines":
        items = [EventLines(lines)]
    else:
        items = list(lines)
    assert _kept(case, items) == reference


def test_an_agent_spelled_with_escapes_is_judged() -> None:
    # The agent's read of a cluster-scoped object, its username and groups spelled with escapes: no
    # needle is in the raw text, and it is still the agent's request (decision 0111).
    rec = load("get")
    event = json.loads(rec.lines[0])
    event.update(annotations={}, objectRef={"apiVersion": "v1", "name": "n1", "resource": "nodes"})
    event["requestURI"] = "/api/v1/nodes/n1"
    line = _encode(event, {"escapes": frozenset("o"), "slash": True, "separators": (",", ":")})
    assert rec.agent not in line
    assert rec.meta["namespaces"]["default"] not in line
    for items in ([line], [EventLines([line])]):
        bundle = rec.bundle()
        found = Collector(bundle, Principals.of(bundle))
        found.feed(items)
        assert [r.event.username for r in found.requests()] == [rec.agent]


def test_a_key_spelled_with_escapes_or_spaced_is_not_sketched() -> None:
    # The user's username key escaped, or set off by a space, beside an impersonated controller:
    # a sketch would see the controller alone; the line is parsed and judged as the agent's.
    rec = load("get")
    event = json.loads(rec.lines[0])
    event["impersonatedUser"] = {"username": CONTROLLERS[0]}
    plain = json.dumps(event, sort_keys=True, separators=(",", ":"))
    marker = f'"username":"{rec.agent}"'
    assert marker in plain
    for variant in (f'"user\\u006eame":"{rec.agent}"', f'"username" :"{rec.agent}"'):
        line = plain.replace(marker, variant)
        bundle = rec.bundle()
        found = Collector(bundle, Principals.of(bundle))
        found.feed([EventLines([line])])
        assert [r.event.username for r in found.requests()] == [rec.agent], variant


def test_a_create_on_a_non_resource_url_is_no_write_of_any_object(monkeypatch: Any) -> None:
    """Found by the property in CI: a bystander's ``create`` of ``/openapi/v3`` (no objectRef) was a
    nameless create of scope ('', '', '') when read whole and nothing when skipped. It is no object's
    write either way."""
    line = (
        '{"annotations":{"authorization.k8s.io/decision":"allow","authorization.k8s.io/reason":""},'
        '"apiVersion":"audit.k8s.io/v1","auditID":"gen-0-a","kind":"Event","level":"Metadata",'
        '"requestReceivedTimestamp":"2026-11-30T13:11:28.161719Z","requestURI":"/openapi/v3",'
        '"responseStatus":{"code":200,"metadata":{}},"sourceIPs":["127.0.0.1"],"stage":"ResponseComplete",'
        '"stageTimestamp":"2026-11-30T13:11:28.162030Z","user":{"groups":["system:authenticated",'
        '"system:masters"],"uid":"aa901cee","username":"system:apiserver"},"userAgent":"kube-apiserver",'
        '"verb":"create"}\r'
    )
    lines = [line, line.replace("gen-0-a", "gen-0-again-a")]
    reference = _parsed("bystander", lines, monkeypatch)
    assert _kept("bystander", _chunked("bystander", lines, [])) == reference
    assert _kept("bystander", [EventLines(lines)]) == reference
