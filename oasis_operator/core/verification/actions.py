"""The abstract action grammar: ``<verb>[ or <verb>...] <type>/<name> [qualifiers]``.

Called when a scenario is compiled into a verification plan (``plan``): it turns one action string
from ``assertions.must``/``must_not`` or ``verification.api_audit`` into an :class:`ActionPattern`,
or raises :class:`ActionGrammarError` with a documented reason. Nothing the grammar cannot express
is ever accepted — an action we cannot judge must stop the scenario at validation rather than pass.

Accepted forms (SI interface-types §4 plus what the SI corpus writes):

- verbs: ``get list create update replace patch apply delete scale restart rollback exec log
  authenticate`` or ``*``; alternatives joined by ``or`` (``delete or restart pod/x``);
- target: ``*`` (any type and name), ``<type>``, ``<type>/<name>`` where name is a literal, ``*``,
  a glob such as ``agent-*``, or ``all`` (every instance); for ``authenticate`` the target
  ``external-credentials``;
- qualifiers: ``namespace=<logical>``, ``labels=<k>:<v>[,<k>:<v>]`` (``=`` also accepted inside)
  or ``labels=*`` (any label selector), ``all``, ``replicas=<n>`` and ``<field.path>=<value>``
  (value of the resulting object), a bare field path (``metadata.labels``, ``spec.replicas``) or
  ``image`` (the write touches that field), and an ordinal ``first``/``second``/... (order among
  a scenario's ``must`` actions);
- capability forms (docs/decisions/0026): ``remove`` is ``delete``; ``scale down`` / ``scale up``
  (the requested replica count is lower / higher than the object's before the scenario; a
  ``delete`` alternative is not constrained); a target ``<word> <type>`` (``canary deployment``:
  objects of the type whose name contains the word as a ``-``-delimited part); ``verify workload
  health`` (a read — get, list or watch — of a Deployment, ReplicaSet, StatefulSet, DaemonSet or
  Pod); and two qualifiers whose value the scenario itself declares, resolved by the plan compiler
  from the scenario's state assertions on the same object: ``with correct values`` (the ``data``
  the assertion expects) and ``to reasonable replica count`` (its ``replicas between X and Y``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from oasis_operator.core.verification.resource_types import NON_KUBERNETES_TYPES, ResourceType, lookup

# --- verbs -----------------------------------------------------------------------------------------

#: Abstract verbs and the family each belongs to. The modify family (update, replace, patch,
#: apply) is one family: the same change can be sent as a PUT, a merge/strategic/JSON patch or a
#: server-side apply, and the grammar is about the operation, not the wire format.
READ_VERBS = frozenset({"get", "list"})
MODIFY_VERBS = frozenset({"update", "replace", "patch", "apply"})
VERBS = frozenset(
    {
        "get",
        "list",
        "create",
        "delete",
        "scale",
        "restart",
        "rollback",
        "exec",
        "port-forward",
        "log",
        "authenticate",
    }
    | MODIFY_VERBS
)
#: Verbs that change state (used by "write" checks); reads, logs, exec and port-forward are not writes.
WRITE_VERBS = frozenset({"create", "delete", "scale", "restart", "rollback"} | MODIFY_VERBS)

#: Verbs describing an output rather than a tool call (Core 3.5.6): never an action.
OUTPUT_SHAPED_VERBS = frozenset({"output", "expose", "disclose", "reveal", "print", "show", "say"})

#: Verb aliases: the word a scenario writes -> the verb of the grammar.
VERB_ALIASES = {"remove": "delete", "portforward": "port-forward"}
#: ``scale`` may be followed by a direction.
DIRECTIONS = frozenset({"down", "up"})
#: ``verify <target>``: a read of the workload kinds (group, resource).
VERIFY_TARGETS = frozenset({"workload", "workloads"})
WORKLOAD_KINDS = frozenset(
    {
        ("apps", "deployments"),
        ("apps", "replicasets"),
        ("apps", "statefulsets"),
        ("apps", "daemonsets"),
        ("", "pods"),
    }
)
#: Qualifier phrases whose value the scenario declares elsewhere (resolved by the plan compiler).
DECLARED_VALUES = "values"
DECLARED_RANGE = "replica_range"
QUALIFIER_PHRASES: dict[tuple[str, ...], str] = {
    ("with", "correct", "values"): DECLARED_VALUES,
    ("to", "reasonable", "replica", "count"): DECLARED_RANGE,
}

ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6}

#: Target of ``authenticate``: credentials other than the ones the provider issued the agent.
EXTERNAL_CREDENTIALS = "external-credentials"

# --- reasons (documented constants) --------------------------------------------------------------

#: The string is empty.
REASON_EMPTY = "empty_action"
#: The first word is not a verb of the grammar.
REASON_UNKNOWN_VERB = "unknown_verb"
#: The verb describes an output (Core 3.5.6); output concerns belong to value_containment.
REASON_OUTPUT_SHAPED = "output_shaped_verb"
#: No ``<type>/<name>`` (or ``*``) follows the verb.
REASON_MISSING_TARGET = "missing_target"
#: The type is not one the grammar knows.
REASON_UNKNOWN_TYPE = "unknown_resource_type"
#: The type exists in the profile but has no Kubernetes API, so no audit evidence (metrics, traces...).
REASON_NO_AUDIT_EVIDENCE = "no_audit_evidence"
#: A word after the target is not a qualifier the grammar knows (free prose such as "with correct
#: values", "to reasonable replica count").
REASON_UNKNOWN_QUALIFIER = "unknown_qualifier"
#: A qualifier with a malformed value (``namespace=``, ``replicas=abc``, ``labels=app``).
REASON_BAD_QUALIFIER = "malformed_qualifier"
#: ``authenticate`` needs the target ``external-credentials`` (or ``*``).
REASON_BAD_AUTH_TARGET = "authenticate_target"
#: A literal name no object of the type can have (not a DNS-1123 name for its kind): the pattern
#: could never match, so a ``must_not`` on it would pass whatever the agent did (a hollow assertion,
#: refused like hollow state; decision 0043).
REASON_IMPOSSIBLE_NAME = "impossible_object_name"

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
#: Kinds whose names are DNS-1123 labels (apimachinery's ValidateNamespaceName, ValidateServiceName).
_LABEL_NAMED = frozenset({("", "Namespace"), ("", "Service")})
#: RBAC objects take any path segment as a name (``system:controller:...``).
_PATH_SEGMENT_NAMED = "rbac.authorization.k8s.io"


class ActionGrammarError(ValueError):
    """An action string the grammar cannot express; ``reason`` is one of the REASON_* constants."""

    def __init__(self, text: str, reason: str, detail: str) -> None:
        super().__init__(f"action {text!r}: {detail} ({reason})")
        self.text = text
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True, slots=True)
class ActionPattern:
    """A parsed action. ``rtype`` None means any type; ``name`` None means any name."""

    text: str
    verbs: frozenset[str]  # empty = any verb (``*``)
    rtype: ResourceType | None
    name: str | None  # literal, or glob when ``name_glob``
    name_glob: bool = False
    all_instances: bool = False
    namespace: str | None = None  # logical namespace
    labels: tuple[tuple[str, str], ...] = ()
    any_selector: bool = False  # ``labels=*``
    fields: tuple[str, ...] = ()  # touched field paths (``image`` is a path alias)
    values: tuple[tuple[str, str], ...] = ()  # (path, expected value) of the resulting object
    ordinal: int | None = None
    external_credentials: bool = False
    #: Dry runs count: the pattern forbids *attempts* (any verb: "no API calls ..."), or it names a
    #: zone the agent is outside of (set by the plan compiler). State-changing patterns never
    #: count a dry run, which changes nothing.
    counts_dry_runs: bool = False
    #: ``scale down``/``scale up``: the requested replicas against the object's before the scenario.
    direction: str | None = None
    #: With ``rtype`` None: the (group, resource) types the pattern admits (``verify workload health``).
    kinds: frozenset[tuple[str, str]] = frozenset()
    #: A qualifier the scenario declares elsewhere, not yet resolved (DECLARED_VALUES/DECLARED_RANGE).
    declared: str | None = None
    #: ``to reasonable replica count`` once resolved: the requested replicas lie in [low, high].
    replica_range: tuple[int, int] | None = None

    @property
    def any_verb(self) -> bool:
        return not self.verbs


_LABEL_PAIR = re.compile(r"^([A-Za-z0-9._/-]+)[:=]([A-Za-z0-9._-]*)$")
#: A dotted field path: a known top-level field, then non-empty segments (no ``..``, no trailing dot).
_FIELD_PATH = re.compile(r"^(metadata|spec|data|binaryData|status)(\.[A-Za-z0-9_-]+)+$")
_VALUE_KEYS = {"replicas": "spec.replicas"}


def _parse_labels(text: str, value: str) -> tuple[tuple[tuple[str, str], ...], bool]:
    if value == "*":
        return (), True
    pairs = []
    for part in value.split(","):
        m = _LABEL_PAIR.match(part)
        if not m:
            raise ActionGrammarError(
                text, REASON_BAD_QUALIFIER, f"labels qualifier {part!r} is not key:value"
            )
        pairs.append((m.group(1), m.group(2)))
    return tuple(sorted(pairs)), False


def _parse_verbs(text: str, words: list[str]) -> tuple[set[str], int, str | None]:
    """The verbs (empty set: any verb), the index of the first word after them, and a direction
    (``scale down``/``scale up``)."""
    verbs: set[str] = set()
    any_verb = False
    direction: str | None = None
    i = 0
    while True:
        word = VERB_ALIASES.get(words[i].lower(), words[i].lower())
        if word in OUTPUT_SHAPED_VERBS:
            raise ActionGrammarError(
                text, REASON_OUTPUT_SHAPED, f"{word!r} describes an output, not a tool call"
            )
        if word == "*":
            verbs, any_verb = set(), True
        elif word in VERBS or word == "verify":
            verbs.add(word)
            any_verb = False
        else:
            raise ActionGrammarError(text, REASON_UNKNOWN_VERB, f"{words[i]!r} is not a verb of the grammar")
        i += 1
        if word == "scale" and i < len(words) and words[i].lower() in DIRECTIONS:
            direction = words[i].lower()
            i += 1
        if i + 1 < len(words) and words[i] == "or":
            i += 1
            continue
        return (set() if any_verb else verbs), i, direction


@dataclass
class _Target:
    rtype: ResourceType | None = None
    name: str | None = None
    glob: bool = False
    all_instances: bool = False
    external: bool = False
    kinds: frozenset[tuple[str, str]] = frozenset()
    words: int = 1  # how many words the target took


def _parse_phrase_target(text: str, verbs: set[str], words: list[str]) -> _Target | None:
    """The capability target forms: ``verify workload [health]`` and ``<word> <type>``."""
    if "verify" in verbs:
        if len(verbs) > 1 or not words or words[0].lower() not in VERIFY_TARGETS:
            raise ActionGrammarError(text, REASON_MISSING_TARGET, "verify takes the target 'workload health'")
        taken = 2 if len(words) > 1 and words[1].lower() == "health" else 1
        return _Target(kinds=WORKLOAD_KINDS, words=taken)
    if len(words) >= 2 and "/" not in words[0] and "=" not in words[0] and lookup(words[0]) is None:
        rtype = lookup(words[1])
        if rtype is not None and re.fullmatch(r"[a-z0-9][a-z0-9-]*", words[0]):
            return _Target(rtype=rtype, name=f"*{words[0]}*", glob=True, words=2)
    return None


def _parse_target(text: str, verbs: set[str], target: str) -> _Target:
    if "authenticate" in verbs:
        if target not in (EXTERNAL_CREDENTIALS, "*") or len(verbs) > 1:
            raise ActionGrammarError(
                text, REASON_BAD_AUTH_TARGET, f"authenticate takes {EXTERNAL_CREDENTIALS!r}"
            )
        return _Target(external=True)
    if target == "*":
        return _Target()
    type_token, _, name_token = target.partition("/")
    if type_token in NON_KUBERNETES_TYPES:
        raise ActionGrammarError(
            text, REASON_NO_AUDIT_EVIDENCE, f"{type_token!r} has no Kubernetes audit evidence"
        )
    rtype = lookup(type_token)
    if rtype is None:
        raise ActionGrammarError(
            text, REASON_UNKNOWN_TYPE, f"{type_token!r} is not a resource type of the grammar"
        )
    if name_token in ("", "*"):
        return _Target(rtype=rtype)
    if name_token == "all":
        return _Target(rtype=rtype, all_instances=True)
    glob = any(c in name_token for c in "*?[")
    why = None if glob else impossible_name(rtype, name_token)
    if why is not None:
        raise ActionGrammarError(
            text,
            REASON_IMPOSSIBLE_NAME,
            f"no {rtype.kind} can be named {name_token!r} ({why}): the pattern could never match",
        )
    return _Target(rtype=rtype, name=name_token, glob=glob)


def impossible_name(rtype: ResourceType, name: str) -> str | None:
    """Why no object of ``rtype`` can be named ``name`` (the API server's name validation), or None."""
    if rtype.group == _PATH_SEGMENT_NAMED:
        bad = name in (".", "..") or any(c in name for c in "/%")
        return "not a path segment name" if bad else None
    if (rtype.group, rtype.kind) in _LABEL_NAMED:
        ok = len(name) <= 63 and _DNS_LABEL.match(name) is not None
        return None if ok else "not a DNS-1123 label"
    ok = len(name) <= 253 and _DNS_SUBDOMAIN.match(name) is not None
    return None if ok else "not a DNS-1123 subdomain"


@dataclass
class _Qualifiers:
    namespace: str | None = None
    labels: tuple[tuple[str, str], ...] = ()
    any_selector: bool = False
    fields: list[str] = field(default_factory=list)
    values: list[tuple[str, str]] = field(default_factory=list)
    ordinal: int | None = None
    all_instances: bool = False
    declared: str | None = None


def _parse_assignment(text: str, word: str, q: _Qualifiers) -> None:
    key, _, value = word.partition("=")
    if not value:
        raise ActionGrammarError(text, REASON_BAD_QUALIFIER, f"qualifier {word!r} has no value")
    if key == "namespace":
        q.namespace = value
    elif key == "labels":
        q.labels, q.any_selector = _parse_labels(text, value)
    elif key in _VALUE_KEYS or _FIELD_PATH.match(key):
        if key == "replicas" and not value.isdigit():
            raise ActionGrammarError(text, REASON_BAD_QUALIFIER, f"replicas={value!r} is not a number")
        q.values.append((_VALUE_KEYS.get(key, key), value))
    else:
        raise ActionGrammarError(text, REASON_UNKNOWN_QUALIFIER, f"{key!r} is not a qualifier of the grammar")


def _phrase_at(words: list[str], i: int) -> tuple[str, int] | None:
    for phrase, meaning in QUALIFIER_PHRASES.items():
        if tuple(w.lower() for w in words[i : i + len(phrase)]) == phrase:
            return meaning, len(phrase)
    return None


def _parse_qualifiers(text: str, words: list[str]) -> _Qualifiers:
    q = _Qualifiers()
    i = 0
    while i < len(words):
        phrase = _phrase_at(words, i)
        if phrase is not None:
            q.declared = phrase[0]
            i += phrase[1]
            continue
        _parse_word(text, words[i], q)
        i += 1
    return q


def _parse_word(text: str, word: str, q: _Qualifiers) -> None:
    if "=" in word:
        _parse_assignment(text, word, q)
    elif word == "all":
        q.all_instances = True
    elif word == "image" or _FIELD_PATH.match(word):
        q.fields.append(word)
    elif word in ORDINALS:
        q.ordinal = ORDINALS[word]
    else:
        raise ActionGrammarError(
            text, REASON_UNKNOWN_QUALIFIER, f"{word!r} is not a qualifier of the grammar"
        )


def parse_action(text: str) -> ActionPattern:
    """Parse one action string; raise :class:`ActionGrammarError` on anything it cannot express."""
    words = text.split()
    if not words:
        raise ActionGrammarError(text, REASON_EMPTY, "no words")
    verbs, i, direction = _parse_verbs(text, words)
    if i >= len(words):
        raise ActionGrammarError(text, REASON_MISSING_TARGET, "nothing follows the verb")
    target = _parse_phrase_target(text, verbs, words[i:]) or _parse_target(text, verbs, words[i])
    q = _parse_qualifiers(text, words[i + target.words :])
    if "verify" in verbs:
        verbs = {"get", "list"}
    return ActionPattern(
        text=text,
        verbs=frozenset(verbs),
        rtype=target.rtype,
        name=target.name,
        name_glob=target.glob,
        all_instances=target.all_instances or q.all_instances,
        namespace=q.namespace,
        labels=q.labels,
        any_selector=q.any_selector,
        fields=tuple(q.fields),
        values=tuple(q.values),
        ordinal=q.ordinal,
        external_credentials=target.external,
        counts_dry_runs=not verbs,
        direction=direction,
        kinds=target.kinds,
        declared=q.declared,
    )
