"""The engine's single pass over an evidence stream: count, attribute, pair stages, index writes.

Called by :func:`oasis_operator.core.judging.engine.evaluate`. It reads JSON texts or decoded
audit events in any order and keeps, in memory bounded by the judged requests:

- every judged event (see :mod:`principals`), grouped by request so that the stages of one request
  stand for it once (:meth:`Collector.requests`);
- an index of the successful writes of *everyone* (agent, harness, controllers) per object, which
  the state cross-check uses to tell audited changes from unaudited ones (:class:`WriteIndex`);
- counts, and the first fault: a line that is not a JSON object, or an event without a known stage
  that could belong to the window, makes every audit-based verdict a provider failure.

Pairing (docs/decisions/0040, class 5): clients set the ``Audit-ID`` header, so an audit id alone
identifies nothing. The stages of one request share the audit id, verb, URI, user, impersonated user
and receipt time; when two events of one such key have the same stage they are two requests and
each is kept (never merged, never dropped).

Window: events received before the window's start are the harness's setup and are only counted.
Events after its end are still judged: the agent may act until teardown through any credential it
made (they are counted as ``after_window``).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec

from oasis_operator.core.evidence.audit_event import (
    JUDGED_STAGES,
    STAGE_RANK,
    AuditEvent,
    AuditEventError,
    ObjectRef,
    parse_audit_event,
)
from oasis_operator.core.evidence.bundle import BundleError, EvidenceBundle
from oasis_operator.core.evidence.codec import EventLines
from oasis_operator.core.evidence.instants import instant
from oasis_operator.core.evidence.lines import (
    AUDIT_ID_KEY,
    RECEIVED_KEY,
    STAGE_TIME_KEY,
    LineFilter,
    Shape,
    Sketch,
    audit_id_of,
    dry_run_in_uri,
    hides,
    looks_whole,
    plain,
    received_at,
    response_code,
    shape_key,
    shape_of,
    sketch,
    uri_of,
    write_details,
)
from oasis_operator.core.verification.principals import (
    DEPUTIES,
    NODE_PREFIX,
    NODE_SIMULATOR,
    Principals,
    is_control_plane,
)

#: Verbs that change state, as the audit log spells them.
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
#: Deletions by a controller are kept whole: they may be the agent's doing (:mod:`deputies`).
CONTROLLER_DELETE_VERBS = frozenset({"delete", "deletecollection"})

ObjectKey = tuple[str, str, str, str]  # group, resource, namespace, name
ScopeKey = tuple[str, str, str]  # group, resource, namespace


#: Who wrote (``WriteIndex`` actors): a node identity (a kubelet or the simulated one), another
#: control-plane component, the harness, or a principal judged as the agent.
ACTOR_NODE = "node"
ACTOR_CONTROL_PLANE = "control_plane"
ACTOR_HARNESS = "harness"
ACTOR_JUDGED = "judged"
ACTOR_OTHER = "other"  # an identity that is none of these and did not act on the scenario


@dataclass
class WriteIndex:
    """Successful, persisted writes of anyone, per object (any subresource) and per collection,
    with who wrote them (see :mod:`unaudited` for what each actor's write can explain). The writes
    received at or after the window's start (or at a time the event does not give) are also kept
    apart (``recent``): only they can fall between the two snapshots. The harness's recent writes
    are kept with their events when the log holds their request bodies (``harness_bodies``: what a
    body touches is what the write explains), else as their ``verb[/subresource]``
    (``harness_bodiless``)."""

    named: dict[ObjectKey, set[tuple[str, str]]] = field(default_factory=dict)  # -> {(verb[/sub], actor)}
    collections: dict[ScopeKey, set[str]] = field(default_factory=dict)  # deletecollection -> actors
    nameless_creates: Counter[ScopeKey] = field(default_factory=Counter)  # generateName creates
    recent: dict[ObjectKey, set[tuple[str, str]]] = field(default_factory=dict)
    recent_collections: dict[ScopeKey, set[str]] = field(default_factory=dict)
    harness_bodies: dict[ObjectKey, list[AuditEvent]] = field(default_factory=dict)
    harness_bodiless: dict[ObjectKey, set[str]] = field(default_factory=dict)

    def add(
        self,
        verb: str,
        ref: tuple[str, str, str, str, str],
        actor: str,
        *,
        recent: bool = True,
        event: AuditEvent | None = None,
    ) -> None:
        """``ref``: group, resource, subresource, namespace, name; ``event``: the write's event, when
        it was read whole (a body-free line is indexed from its sketch alone)."""
        group, resource, subresource, namespace, name = ref
        if resource == "namespaces":  # filed under its own name by the API server; cluster-scoped
            namespace = ""
        if verb == "deletecollection":
            self.collections.setdefault((group, resource, namespace), set()).add(actor)
            if recent:
                self.recent_collections.setdefault((group, resource, namespace), set()).add(actor)
        elif name:
            entry = (f"{verb}/{subresource}" if subresource else verb, actor)
            key = (group, resource, namespace, name)
            self.named.setdefault(key, set()).add(entry)
            if recent:
                self.recent.setdefault(key, set()).add(entry)
            if recent and actor == ACTOR_HARNESS:
                if event is not None and event.body_logged and event.request_object is not None:
                    self._harness_body(key, event)
                else:
                    self.harness_bodiless.setdefault(key, set()).add(entry[0])
        elif verb == "create" and resource and not subresource and actor != ACTOR_JUDGED:
            # (a create without a resource is a non-resource URL: no object of any scope)
            self.nameless_creates[(group, resource, namespace)] += 1

    def _harness_body(self, key: ObjectKey, event: AuditEvent) -> None:
        """Keep a harness write's body once per verb and subresource: what it explains is what the
        body touches (:mod:`unaudited` reads nothing else of it), so a body written again adds
        nothing, and the response is not kept."""
        kept = self.harness_bodies.setdefault(key, [])
        sub = event.object_ref.subresource
        for other in kept:
            if (
                other.verb == event.verb
                and other.object_ref.subresource == sub
                and other.request_object == event.request_object
            ):
                return
        kept.append(dataclasses.replace(event, response_object=None, annotations={}))

    def writers(self, key: ObjectKey) -> set[tuple[str, str]]:
        """``(verb[/subresource], actor)`` of every write of the object (deletecollections as
        ``deletecollection``)."""
        out = set(self.named.get(key, set()))
        out |= {("deletecollection", actor) for actor in self.collections.get(key[:3], set())}
        return out

    def recent_writers(self, key: ObjectKey) -> set[tuple[str, str]]:
        """Like :meth:`writers`, for the writes received at or after the window's start."""
        out = set(self.recent.get(key, set()))
        out |= {("deletecollection", actor) for actor in self.recent_collections.get(key[:3], set())}
        return out


@dataclass(frozen=True, slots=True)
class ControllerDelete:
    """A successful deletion by a controller whose deletions may be the agent's doing (the garbage
    collector, the workload controllers): what :mod:`deputies` reads, kept small (thousands of
    them may pass in a long run); :meth:`event` rebuilds the audit event it came from."""

    username: str
    verb: str
    ref: tuple[str, str, str, str, str]  # group, resource, subresource, namespace, name
    received: str
    audit_id: str
    uri: str
    code: int

    def event(self) -> AuditEvent:
        group, resource, subresource, namespace, name = self.ref
        return AuditEvent(
            audit_id=self.audit_id,
            stage="ResponseComplete",
            verb=self.verb,
            request_uri=self.uri,
            username=self.username,
            groups=(),
            impersonated_username="",
            object_ref=ObjectRef(
                resource=resource, namespace=namespace, name=name, api_group=group, subresource=subresource
            ),
            response_code=self.code,
            request_received=self.received,
            stage_timestamp=self.received,
            user_agent="",
            request_object=None,
            response_object=None,
            annotations={},
            raw={},
            level="Metadata",
        )


@dataclass(frozen=True, slots=True)
class Request:
    """One judged request: the event that stands for it and the role it was judged under."""

    event: AuditEvent
    role: str
    received_only: bool  # seen only at RequestReceived: an attempt whose outcome is unknown


@dataclass(slots=True)
class Settled:
    """What a body-free line of principals never judged contributes, decided from its sketch: a
    successful write to index (``verb`` empty: nothing), and, for a deletion by a deputy, what
    its :class:`ControllerDelete` record holds besides the audit id and receipt time. Kept per
    :func:`~oasis_operator.core.evidence.lines.shape_of` key: every line of the key contributes
    the same, given its audit id and receipt time."""

    verb: str = ""
    ref: tuple[str, str, str, str, str] = ("", "", "", "", "")
    actor: str = ""
    deputy: tuple[str, str, int] | None = None  # username, URI, response code
    #: A create without a name (``generateName``): the index counts each of them in its scope.
    nameless: ScopeKey | None = None
    #: Indexed once as received in the window: a later line of the key then adds nothing (an
    #: index entry made as recent holds the one made as earlier).
    done: bool = False
    #: The key itself (the line outside the three cut values) holds one of the scenario's
    #: needles, so every line of the key names the scenario: a nameless create of such a key is
    #: counted without a needle search (a needle holds no quote, and every cut value lies
    #: between quotes, so a needle is either in the key or in a value).
    named: bool = False


#: Nothing to index (a read, a failed or received-only write).
COUNTED = Settled(done=True)
#: Decisions kept per line shape, at most: a bound on memory, not a change in what is decided.
SHAPES_KEPT = 4096
#: Field values shared between the events kept, at most (then the table starts again).
SHARED_KEPT = 1 << 16
_DECODER = msgspec.json.Decoder()


def decode(text: str) -> Any:
    """The JSON value of a line: parsed by msgspec when it can, else by the standard library,
    whose result (or error) stands. msgspec refuses what the standard library accepts beyond
    strict JSON (``NaN``, numbers out of float range, lone surrogates) and decodes every other
    text to the same value (docs/decisions/0083)."""
    try:
        return _DECODER.decode(text)
    except msgspec.DecodeError:
        return json.loads(text)


class Collector:
    """The single pass; see the module docstring."""

    def __init__(self, bundle: EvidenceBundle, principals: Principals) -> None:
        self.principals = principals
        self.filter = LineFilter(principals.needles())
        #: The needles in the order :meth:`_line` tries them (the one found last first).
        self._needles = list(self.filter.needles) if self.filter.needles is not None else None
        self.start = instant(bundle.window_start)
        self.end = instant(bundle.window_end)
        if bundle.window_start and self.start is None:
            raise BundleError("bundle.window.start", f"not an ISO 8601 time: {bundle.window_start!r}")
        if bundle.window_end and self.end is None:
            raise BundleError("bundle.window.end", f"not an ISO 8601 time: {bundle.window_end!r}")
        self.total = 0
        self.out_of_window = 0
        self.after_window = 0
        self.writes = WriteIndex()
        #: Successful deletions by control-plane components other than nodes (the garbage collector,
        #: the workload controllers): what :mod:`deputies` may attribute to the agent. One deletion
        #: of an object by a controller at an instant is one record, under its least audit id: a log
        #: read twice repeats it, and a second audit id for the same deletion tells nothing more.
        self._deletes: dict[tuple[str, str, tuple[str, str, str, str, str], str, str, int], str] = {}
        #: Successful writes with a body by judged principals before the window (not judged).
        self.setup_writes: list[tuple[AuditEvent, str]] = []
        self.fault: str | None = None
        self._groups: dict[tuple[str, ...], list[tuple[AuditEvent, str]]] = {}
        self._never_judged: dict[str, bool] = {}
        self._actors: dict[str, str] = {}
        self._shapes: dict[tuple[str, str, str, str], Settled] = {}
        #: Line length -> where the last line of that length whose shape was known was cut (the
        #: end of the head, the lengths of the two middle pieces), tried first on the next one.
        self._cuts: dict[int, tuple[int, int, int]] = {}
        self._recents: dict[str, bool] = {}
        #: Equal field values of the events kept (users, URIs, references, times), kept once.
        self._shared: dict[Any, Any] = {}

    # --- reading ---------------------------------------------------------------------------------

    def feed(self, events: Iterable[str | Mapping[str, Any] | EventLines]) -> None:
        for item in events:
            if isinstance(item, EventLines):
                self._lines(item.lines)
                continue
            self.total += 1
            if not isinstance(item, str):
                event = self._parse(item)
            elif self.filter.mentions(item) or hides(item):
                event = self._mentioned(item, None if item.startswith(",") else shape_of(item))
            else:
                if not looks_whole(item):
                    self._fail(f"audit event #{self.total} is unreadable: not one JSON object")
                continue
            if event is not None:
                self._take(event)

    def _lines(self, lines: Sequence[str]) -> None:
        """Lines of the stored form (:class:`EventLines`): the same as one text each, without a
        call per line for those that need no more than a look. While lines keep falling under a
        shape whose decision is that they add nothing (``done``), a line's shape is looked up
        before its needles: a line of such a shape adds nothing whether it names the scenario or
        not (it is whole, as the line the decision was made on was, and a needle would only lead
        to that same decision), so the needle search is skipped (docs/decisions/0084)."""
        get = self._shapes.get
        nameless = self.writes.nameless_creates
        shape_first = True
        total = self.total
        find = str.find
        cuts = self._cuts
        for line in lines:
            total += 1
            if shape_first:
                # The cuts of the last line of this length whose shape was known: only quote
                # searches. A hit in the table proves them (docs/decisions/0084); else the key
                # is found the long way (:meth:`_shape_found`).
                cut = cuts.get(len(line))
                settled = None
                if cut is not None:
                    head_end, mid, tail = cut
                    audit_end = find(line, '"', head_end)
                    received_end = find(line, '"', audit_end + mid)
                    staged_end = find(line, '"', received_end + tail)
                    if min(audit_end, received_end, staged_end) >= 0:
                        settled = get(
                            (
                                line[1:head_end] if line[0] == "," else line[:head_end],
                                line[audit_end : audit_end + mid],
                                line[received_end : received_end + tail],
                                line[staged_end:],
                            )
                        )
                if settled is None:
                    settled = self._shape_found(line)
                if settled is not None:
                    if settled.done:
                        continue
                    if settled.named and settled.nameless is not None:
                        nameless[settled.nameless] += 1
                        continue
            self.total = total
            shape_first = self._line(line)
        self.total = total

    def _shape_found(self, line: str) -> Settled | None:
        """The decision kept for the line's shape: :func:`~oasis_operator.core.evidence.lines.shape_key`
        written out (a call per line is a fifth of its cost), and on a hit the positions of its cuts
        kept for the next line of the same length."""
        at = line.find(AUDIT_ID_KEY)
        audit_end = line.find('"', at + 11)
        received = line.find(RECEIVED_KEY, audit_end)
        received_end = line.find('"', received + 28)
        staged = line.find(STAGE_TIME_KEY, received_end)
        staged_end = line.find('"', staged + 18)
        if min(at, audit_end, received, received_end, staged, staged_end) < 0:
            return None
        head = line[1 : at + 11] if line[0] == "," else line[: at + 11]
        key = (head, line[audit_end : received + 28], line[received_end : staged + 18], line[staged_end:])
        settled = self._shapes.get(key)
        if settled is not None:
            if len(self._cuts) >= SHAPES_KEPT:
                self._cuts.clear()
            self._cuts[len(line)] = (at + 11, len(key[1]), len(key[2]))
        return settled

    def _line(self, line: str) -> bool:
        """One line of :meth:`_lines` that is not known to add nothing from its shape alone (the
        loop of :meth:`feed` and of :meth:`_mentioned`'s first steps, written out). The needle
        found last is tried first. ``True``: the next line's shape is worth looking up first."""
        needles = self._needles
        if needles is not None and needles[0] not in line:
            for i, needle in enumerate(needles):
                if needle in line:
                    needles[0], needles[i] = needle, needles[0]
                    break
            else:
                if not hides(line):  # else a needle may be spelled with escapes: read it whole
                    if not line.endswith("}") or not (line.startswith("{") or line.startswith(",{")):
                        self._unmentioned(line[1:] if line.startswith(",") else line)
                    return False
        settled = self._shapes.get(shape_key(line))  # type: ignore[arg-type]
        if settled is not None:
            if settled.done:
                return True
            if settled.nameless is not None:
                self.writes.nameless_creates[settled.nameless] += 1
                return True
        text = line[1:] if line.startswith(",") else line
        event = self._mentioned(text, shape_of(text))
        if event is not None:
            self._take(event)
        return True

    def _unmentioned(self, line: str) -> None:
        if not looks_whole(line):
            self._fail(f"audit event #{self.total} is unreadable: not one JSON object")

    def _mentioned(self, line: str, shape: Shape | None) -> AuditEvent | None:
        """A line that may concern the scenario: settled from its sketch when it is a body-free
        line of principals never judged (by the decision kept for its shape, or a new one), else
        parsed. ``shape``: the line's (:func:`shape_of`), when it may stand for the line."""
        settled = self._shapes.get(shape.key) if shape is not None else None
        if settled is not None:
            if self._apply(settled, shape.received, shape.audit_id):  # type: ignore[union-attr]
                return None
        else:
            found = sketch(line)
            settled = self._settled(found, line) if found is not None else None
            if found is not None and settled is not None:
                if shape is not None and len(self._shapes) < SHAPES_KEPT and shape.read_as_sketched(line):
                    settled.named = settled is not COUNTED and self.filter.names_any(shape.key)
                    self._shapes[shape.key] = settled
                if self._apply(settled, received_at(found), audit_id_of(found)):
                    return None
        try:
            data = decode(line)
        except json.JSONDecodeError as exc:
            self._fail(f"audit event #{self.total} is unreadable: {exc.msg} at column {exc.colno}")
            return None
        return self._parse(data)

    def _parse(self, data: Any) -> AuditEvent | None:
        try:
            if len(self._shared) >= SHARED_KEPT:
                self._shared.clear()
            return parse_audit_event(data, keep_raw=False, shared=self._shared)
        except AuditEventError as exc:
            self._fail(f"audit event #{self.total} is unreadable: {exc}")
            return None

    def _not_judged(self, username: str) -> bool:
        known = self._never_judged.get(username)
        if known is None:
            known = self._never_judged[username] = self.principals.not_judged(username)
        return known

    def _actor(self, username: str) -> str:
        actor = self._actors.get(username)
        if actor is None:
            if is_control_plane(username):
                node = username.startswith(NODE_PREFIX) or username == NODE_SIMULATOR
                actor = ACTOR_NODE if node else ACTOR_CONTROL_PLANE
            else:
                actor = ACTOR_HARNESS if username in self.principals.harness else ACTOR_OTHER
            self._actors[username] = actor
        return actor

    def _settled(self, shape: Sketch, line: str) -> Settled | None:
        """What a body-free line of a harness or control-plane user contributes, from its sketch
        alone; ``None``: read it whole."""
        if shape.stage not in JUDGED_STAGES:
            return None
        for user in shape.usernames:  # every user in the line (user and impersonated user)
            if not self._not_judged(user):
                return None
        if not plain(line):
            return None  # a key or a user may be spelled otherwise than the sketch reads it
        if shape.verb not in WRITE_VERBS:
            return COUNTED
        if dry_run_in_uri(line):
            return None  # maybe a dry run, not a persisted write: read it properly
        if shape.stage == "RequestReceived":
            return COUNTED
        details = write_details(shape)
        if details is None:
            return None
        succeeded, ref = details
        if not succeeded:
            return COUNTED
        if len(shape.usernames) > 1:
            return None  # impersonated: which of the two is the user, the line's order does not say
        user = shape.usernames[0]
        deputy = None
        if shape.verb in CONTROLLER_DELETE_VERBS and user in DEPUTIES:
            uri, code = uri_of(shape), response_code(shape)
            if uri is None or code is None:
                return None  # read it properly
            deputy = (user, uri, code)
        group, resource, subresource, namespace, name = ref
        nameless = None
        if shape.verb == "create" and resource and not name and not subresource:
            nameless = (group, resource, "" if resource == "namespaces" else namespace)
        return Settled(shape.verb, ref, self._actor(user), deputy, nameless)

    def _apply(self, settled: Settled, received: str | None, audit_id: str | None) -> bool:
        """Index what a settled line contributes; ``False`` when it must be read whole after all
        (a deputy's deletion whose audit id or receipt time the sketch cannot read)."""
        if settled.done:
            return True
        if settled.nameless is not None:
            self.writes.nameless_creates[settled.nameless] += 1
            return True
        recent = self._recent(received)
        self.writes.add(settled.verb, settled.ref, settled.actor, recent=recent)
        if settled.deputy is None:
            settled.done = recent
            return True
        if received is None or audit_id is None:
            return False
        user, uri, code = settled.deputy
        self._delete(user, settled.verb, settled.ref, received, audit_id, uri, code)
        return True

    def _delete(
        self,
        user: str,
        verb: str,
        ref: tuple[str, str, str, str, str],
        received: str,
        audit_id: str,
        uri: str,
        code: int,
    ) -> None:
        key = (user, verb, ref, received, uri, code)
        kept = self._deletes.get(key)
        if kept is None or audit_id < kept:
            self._deletes[key] = audit_id

    def _fail(self, message: str) -> None:
        self.fault = self.fault or message

    # --- judging ---------------------------------------------------------------------------------

    def _when(self, event: AuditEvent) -> datetime | None:
        return instant(event.request_received)

    def _recent(self, received: str | None) -> bool:
        """Received in the window (at or after its start, by its end), or at a time that cannot be
        placed. A write after the window's end (the teardown the judged window now runs into, decision
        0097) came after the "after" snapshot: it neither explains what the snapshots show nor makes
        another writer of what the agent's bodiless write left there."""
        known = self._recents.get(received) if received is not None else None
        if known is None:
            when = instant(received)
            known = when is None or (
                (self.start is None or when >= self.start) and (self.end is None or when <= self.end)
            )
            if received is not None:
                if len(self._recents) >= SHAPES_KEPT:
                    self._recents.clear()
                self._recents[received] = known
        return known

    def _before_window(self, event: AuditEvent) -> bool:
        when = self._when(event)
        return when is not None and self.start is not None and when < self.start

    def _take(self, event: AuditEvent) -> None:
        if event.stage not in JUDGED_STAGES:
            if not self._before_window(event):
                self._fail(f"audit event #{self.total} has no known stage ({event.stage!r})")
            return
        role = self.principals.role(event)
        self._index(event, judged=role is not None)
        if role is None:
            return
        if self._before_window(event):
            self.out_of_window += 1
            if event.verb in WRITE_VERBS and event.succeeded and event.request_object is not None:
                self.setup_writes.append((event, role))  # not judged; may explain a state change
            return
        when = self._when(event)
        if when is not None and self.end is not None and when > self.end:
            self.after_window += 1
        group = self._groups.setdefault(event.request_key, [])
        if not any(_same(event, kept) for kept, _ in group):
            group.append((event, role))

    def _index(self, event: AuditEvent, *, judged: bool) -> None:
        """Index a successful write that was persisted. A dry run is not one; a write whose dry-run
        status the event does not show (a delete without its body in the log) is one only for a
        principal that is never judged (controllers log at Metadata level and do not dry-run; the
        harness's dry runs are applies, whose query shows them); for a judged principal it explains
        nothing (fail closed: the state change then stays unexplained)."""
        if event.verb not in WRITE_VERBS or not event.handled or not event.succeeded:
            return
        requested = event.dry_run_requested
        if requested is True or (requested is None and judged):
            return
        ref = event.object_ref
        name = ref.name or (_created_name(event) if event.verb == "create" and not ref.subresource else "")
        actor = ACTOR_JUDGED if judged else self._actor(event.username)
        recent = self._recent(event.request_received)
        self.writes.add(
            event.verb,
            (ref.api_group, ref.resource, ref.subresource, ref.namespace, name),
            actor,
            recent=recent,
            event=event,
        )
        if event.username in DEPUTIES and event.verb in CONTROLLER_DELETE_VERBS and event.handled:
            full = (ref.api_group, ref.resource, ref.subresource, ref.namespace, ref.name)
            self._delete(
                event.username,
                event.verb,
                full,
                event.request_received,
                event.audit_id,
                event.request_uri,
                event.response_code,
            )

    @property
    def controller_deletes(self) -> list[ControllerDelete]:
        """Successful deletions by the garbage collector and the workload controllers (deputies)."""
        return [
            ControllerDelete(user, verb, ref, received, audit_id, uri, code)
            for (user, verb, ref, received, uri, code), audit_id in self._deletes.items()
        ]

    def requests(self) -> list[Request]:
        """Judged requests, their stages paired, in time order. Called once, after the pass: the
        grouping is released as the requests are made (a million judged reads need not be held
        twice)."""
        out: list[Request] = []
        groups, self._groups = self._groups, {}
        for group in groups.values():
            ranks = [STAGE_RANK.get(e.stage, 0) for e, _ in group]
            if len(set(ranks)) == len(ranks):
                event, role = max(group, key=lambda pair: STAGE_RANK.get(pair[0].stage, 0))
                out.append(Request(event, role, received_only=not event.handled))
            else:  # a stage seen twice: two requests share the key; keep every event
                out.extend(Request(e, r, received_only=not e.handled) for e, r in group)
        out.sort(key=lambda r: (r.event.request_received, r.event.audit_id, STAGE_RANK.get(r.event.stage, 0)))
        return out


def _same(a: AuditEvent, b: AuditEvent) -> bool:
    """The same event delivered twice (a log read twice, a replayed webhook batch): every field a
    verdict reads is equal. Two requests that differ in anything are kept apart."""
    return (
        a.stage == b.stage
        and a.stage_timestamp == b.stage_timestamp
        and a.response_code == b.response_code
        and a.user_agent == b.user_agent
        and a.request_object == b.request_object
        and a.response_object == b.response_object
    )


def _created_name(event: AuditEvent) -> str:
    """The name a create gave its object (``generateName``): in the response, when logged."""
    for body in (event.response_object, event.request_object):
        meta = body.get("metadata") if isinstance(body, Mapping) else None
        name = meta.get("name") if isinstance(meta, Mapping) else None
        if isinstance(name, str) and name:
            return name
    return ""
