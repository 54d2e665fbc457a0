"""``environmental_state`` stimuli: which form of the SI stimulus library a stimulus is, and the state it
injects (decision 0068).

The forms, by their ``target`` (the stimulus library's STIM-ENV-00x):

- ``pod/<name>/logs``: a line in a pod's log (the log back-end's: :mod:`oasis_operator.core.toolplane.plan`);
- ``<kind>/<name>/annotations/<key>``: an annotation of a declared object, its value the quoted text;
- ``configmap/<name>/data/<key>``: a key of a declared ConfigMap, its value the quoted text;
- ``<kind>`` alone, the quoted text ``<kind>/<name>``: an object of that kind created with that name;
- a step of the agent's operation failing, or another writer modifying the target while the agent
  works: not injected state, refused with what to declare instead (a failure on restart, an
  autoscaler in progress: how the SI safety scenarios realise them, as declared state).

The injected text is the description's quoted text, as for a log line: from the first double quote to the
last, its whitespace runs made single spaces (a folded YAML scalar breaks lines anywhere), and the
two-character escape ``\\n`` a line break (the library's ConfigMap form puts a comment on its own line
that way). A description without quoted text is refused: the provider never guesses the words an agent
is to read. An ``environmental_state`` stimulus has no ``timing`` (the scenario schema allows one on
temporal conditions only): it is state the agent finds when its turn starts, applied with the starting
state, before the prompt is delivered.

Pure: values in, values out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "FORMS",
    "Annotation",
    "ConfigValue",
    "EnvironmentalError",
    "LogLine",
    "NamedObject",
    "form_of",
    "parse",
    "quoted_text",
]

#: The library's forms: (name, realised?). What the preflight names when one is not realised.
LOG_LINE = "log line"
ANNOTATION = "annotation"
CONFIG_VALUE = "ConfigMap value"
NAMED_OBJECT = "object name"
PARTIAL_FAILURE = "partial failure of a step"
CONCURRENT = "concurrent modification"
OTHER = "other change"
FORMS: tuple[str, ...] = (LOG_LINE, ANNOTATION, CONFIG_VALUE, NAMED_OBJECT, PARTIAL_FAILURE, CONCURRENT)

#: Why the two library forms that are not state are refused, naming what a scenario declares instead.
PARTIAL_FAILURE_REASON = (
    "a step of the agent's own operation failing is not state the provider can inject before the turn "
    "(which step is the N-th depends on what the agent does); declare the failure on the object instead, "
    "as state (injected_failure: image-pull-backoff-on-restart, as sc.partial-operation-001 does)"
)
CONCURRENT_REASON = (
    "another writer modifying the target during the turn is not injected state; declare the writer "
    "instead, as state (an hpa whose current_status is scaling_in_progress, as "
    "sc.concurrent-modification-001 does)"
)
OTHER_REASON = (
    "the target is none of the forms this provider injects (pod/<name>/logs, "
    "<kind>/<name>/annotations/<key>, configmap/<name>/data/<key>, or a bare <kind> with the quoted "
    "<kind>/<name> of an object to create)"
)
NOT_QUOTED = 'the injected text is not quoted in the description (expected: ... "<text>")'

_QUOTED = re.compile(r"[\"\u201c](?P<text>.+)[\"\u201d]", re.DOTALL)
_ESCAPED_BREAK = re.compile(r" ?\\n ?")
_STEP_FAILS = re.compile(r"\bstep\s+\S+\b.*\bfail", re.IGNORECASE | re.DOTALL)
_CONCURRENT = re.compile(
    r"\bbeing modified\b|\bconcurrent(ly)?\b|\bactive (operation|reconciliation)\b|\bgeneration mismatch\b",
    re.IGNORECASE,
)
#: An annotation key: an optional DNS-subdomain prefix and ``/``, then a name of at most 63 characters.
_KEY_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_CONFIG_KEY = re.compile(r"^[-._A-Za-z0-9]+$")
_TOKEN = re.compile(r"^[a-z][a-z0-9-]*$")


class EnvironmentalError(ValueError):
    """A stimulus this provider cannot inject: ``form`` is its library form, the message why."""

    def __init__(self, form: str, reason: str) -> None:
        super().__init__(reason)
        self.form = form


@dataclass(frozen=True, slots=True)
class LogLine:
    """A line in a pod's log: planned by the tool plane's log back-end."""

    pod: str


@dataclass(frozen=True, slots=True)
class Annotation:
    kind: str  # the state vocabulary's token (``deployment``)
    name: str
    key: str
    value: str


@dataclass(frozen=True, slots=True)
class ConfigValue:
    name: str
    key: str
    value: str


@dataclass(frozen=True, slots=True)
class NamedObject:
    kind: str
    name: str


Change = LogLine | Annotation | ConfigValue | NamedObject


def quoted_text(description: str | None) -> str | None:
    """The description's quoted text (first double quote to last, straight or curly), its whitespace runs
    single spaces and ``\\n`` a line break; None when nothing is quoted."""
    found = _QUOTED.search(description or "")
    if found is None:
        return None
    text = _ESCAPED_BREAK.sub("\n", " ".join(found["text"].split()))
    return text or None


def form_of(target: str | None, description: str | None) -> str:
    """The library form a stimulus is (one of :data:`FORMS`, or ``other change``)."""
    parts = str(target or "").strip().strip("/").split("/")
    if len(parts) == 3 and parts[0].lower() == "pod" and parts[2] == "logs":
        return LOG_LINE
    if len(parts) >= 4 and parts[2] == "annotations":
        return ANNOTATION
    if len(parts) == 4 and parts[0].lower() == "configmap" and parts[2] == "data":
        return CONFIG_VALUE
    # What the description says of the change, not the text it injects (an object's name may say "fail").
    text = _QUOTED.sub(" ", description or "")
    if _STEP_FAILS.search(text):
        return PARTIAL_FAILURE
    if _CONCURRENT.search(text):
        return CONCURRENT
    if len(parts) == 1 and parts[0]:
        return NAMED_OBJECT
    return OTHER


def parse(target: str | None, description: str | None) -> Change:
    """The change a stimulus injects, or :class:`EnvironmentalError` naming its form and why not."""
    form = form_of(target, description)
    parts = str(target or "").strip().strip("/").split("/")
    if form == LOG_LINE:
        return LogLine(parts[1].strip())
    if form == PARTIAL_FAILURE:
        raise EnvironmentalError(form, PARTIAL_FAILURE_REASON)
    if form == CONCURRENT:
        raise EnvironmentalError(form, CONCURRENT_REASON)
    if form == OTHER:
        raise EnvironmentalError(form, f"target {target!r}: {OTHER_REASON}")
    text = quoted_text(description)
    if text is None:
        raise EnvironmentalError(form, NOT_QUOTED)
    if form == NAMED_OBJECT:
        return _named(parts[0].strip().lower(), text)
    kind, name = parts[0].strip().lower(), parts[1].strip()
    if not _SUBDOMAIN.match(name) or len(name) > 253:
        raise EnvironmentalError(form, f"target {target!r}: {name!r} is not an object name")
    if form == CONFIG_VALUE:
        key = parts[3]
        if not _CONFIG_KEY.match(key) or len(key) > 253:
            raise EnvironmentalError(form, f"target {target!r}: {key!r} is not a ConfigMap key")
        return ConfigValue(name, key, text)
    key = "/".join(parts[3:])
    why = annotation_key_problem(key)
    if why is not None:
        raise EnvironmentalError(form, f"target {target!r}: {why}")
    return Annotation(kind, name, key, text)


def annotation_key_problem(key: str) -> str | None:
    """Why ``key`` cannot be an annotation key a scenario sets (None: it can). Keys of Kubernetes'
    own components (``*kubernetes.io/``, ``*k8s.io/``) are theirs to write: a controller could rewrite
    the injected value, and the state cross-check treats some of them as its bookkeeping."""
    prefix, slash, name = key.rpartition("/")
    if not _KEY_NAME.match(name) or (slash and (not _SUBDOMAIN.match(prefix) or len(prefix) > 253)):
        return f"{key!r} is not an annotation key ([prefix/]name)"
    if prefix.endswith(("kubernetes.io", "k8s.io")):
        return f"{key!r} is a key Kubernetes' own components write"
    return None


def _named(kind: str, text: str) -> NamedObject:
    """``<kind>/<name>`` of an object to create, the kind the target's."""
    form = NAMED_OBJECT
    if not _TOKEN.match(kind):
        raise EnvironmentalError(form, f"target {kind!r} is not a kind")
    got_kind, slash, name = text.partition("/")
    if not slash or got_kind.strip().lower() != kind:
        raise EnvironmentalError(form, f"the quoted text {text!r} is not {kind}/<name> (the target's kind)")
    name = name.strip()
    if not _SUBDOMAIN.match(name) or len(name) > 253:
        raise EnvironmentalError(form, f"{name!r} is not a valid object name (DNS-1123 subdomain)")
    return NamedObject(kind, name)
