"""Sealing a scenario's evidence: no registered value is stored in plaintext (decision 0054).

Called by the run workflow on each scenario's evidence before it is stored (and so before the report
is computed from it, and before it can be exported). It turns an evidence text holding registered
values (the provider's secret values, resolved for value containment) into one that holds none, from
which value containment still computes the same verdict:

- each registered value is replaced in the bundle by its *sealed spelling*: for every spelling
  :mod:`disclosure` searches (forms and fragments), a salted digest (and length) instead of the text,
  with the salt the caller chose for the scenario;
- every occurrence of a strong value's spelling or fragment in the stored texts (the agent's answer,
  reasoning and tool calls, the snapshots, the audit events, the tool records) is replaced by a marker
  carrying the digest of what it replaced; a string in which a spelling shows only once decoded
  (percent, HTML or backslash escapes) is replaced whole by the marker of that spelling;
- weak values (short or letters only: ``admin``) are words, not secrets a digest could protect (any
  dictionary finds them); they stay where they occur, and are sealed in the bundle like the others.

The sealed spelling finds a disclosure by its markers and by digest over every run of characters of
the right length, so a replay judges the stored texts without the plaintext. No clock, no I/O, no
randomness: the salt is handed in.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from oasis_operator.core.evidence.bundle import SOURCE_AGENT_OUTPUT, bundle_from_header
from oasis_operator.core.evidence.codec import read_lines, render_text
from oasis_operator.core.verification.canonical import PIECE, Patterns, exposed, holds_piece, patterns
from oasis_operator.core.verification.containment import ref_key
from oasis_operator.core.verification.context import leaf_values
from oasis_operator.core.verification.disclosure import (
    APART,
    Canonical,
    Form,
    Fragment,
    Spelling,
    marker,
    sealed_digest,
    shares_run,
    spelling_to_dict,
    views,
)

SCHEME = "oasis-sealed/v1: sha256(salt NUL spelling), 128 bits"


def _fold(text: str, fold: bool) -> str:
    return text.casefold() if fold else text


def seal_spelling(spelling: Spelling, salt: str) -> Spelling:
    """The spelling with digests in place of every text."""
    forms = tuple(
        Form(
            name=f.name,
            text="",
            fold=f.fold,
            weak=f.weak,
            length=len(f.text),
            salt=salt,
            digest=sealed_digest(salt, _fold(f.text, f.fold)),
        )
        for f in spelling.forms
    )
    fragments = tuple(
        Fragment(
            name=f.name,
            text="",
            run=f.run,
            fold=f.fold,
            salt=salt,
            digests=frozenset(
                sealed_digest(salt, _fold(f.text, f.fold)[i : i + f.run])
                for i in range(len(f.text) - f.run + 1)
            ),
        )
        for f in spelling.fragments
    )
    canonical = tuple(
        Canonical(name=c.name, text="", digest=sealed_digest(salt, c.key), salt=salt)
        for c in spelling.canonical
    )
    return Spelling(forms=forms, fragments=fragments, words=spelling.words, canonical=canonical)


def _find(hay: str, needle: str, fold: bool) -> int:
    if not fold:
        return hay.find(needle)
    # Case-insensitive on the original positions (casefold may change the length of a text).
    lowered = hay.lower()
    return lowered.find(needle.lower()) if len(lowered) == len(hay) else hay.find(needle)


def _redact_plain(text: str, spelling: Spelling, salt: str) -> str:
    for form in spelling.forms:
        if form.weak or not form.text:
            continue
        at = _find(text, form.text, form.fold)
        while at >= 0:
            piece = text[at : at + len(form.text)]
            text = (
                text[:at] + marker(sealed_digest(salt, _fold(piece, form.fold))) + text[at + len(form.text) :]
            )
            at = _find(text, form.text, form.fold)
    for fragment in spelling.fragments:
        source = _fold(fragment.text, fragment.fold)
        shared = _shared(source, text, fragment)
        while shared is not None:
            piece = _fold(text[shared : shared + fragment.run], fragment.fold)
            text = text[:shared] + marker(sealed_digest(salt, piece)) + text[shared + fragment.run :]
            shared = _shared(source, text, fragment)
    return text


def _shared(source: str, text: str, fragment: Fragment) -> int | None:
    if len(text) < fragment.run:
        return None
    hay = _fold(text, fragment.fold)
    return shares_run(source, hay, fragment.run) if len(hay) == len(text) else None


def _decoded_disclosure(text: str, spelling: Spelling, salt: str) -> str | None:
    """The marker for a strong spelling or fragment that shows only once ``text`` is decoded."""
    for view in views(text)[1:]:
        for form in spelling.forms:
            if not form.weak and form.text and _find(view, form.text, form.fold) >= 0:
                return marker(sealed_digest(salt, _fold(form.text, form.fold)))
        for fragment in spelling.fragments:
            at = _shared(_fold(fragment.text, fragment.fold), view, fragment)
            if at is not None:
                return marker(sealed_digest(salt, _fold(view[at : at + fragment.run], fragment.fold)))
    return None


def _canonical_disclosure(text: str, spelling: Spelling, salt: str) -> str | None:
    """The marker for a strong value exposed in ``text`` only as the property reads it (decision 0085)."""
    for c in spelling.canonical:
        if c.text and exposed(patterns(c.text), text) is not None:
            return marker(sealed_digest(salt, c.key))
    return None


def _shortest(spelling: Spelling) -> int:
    sizes = [len(f.text) for f in spelling.forms if not f.weak] + [f.run for f in spelling.fragments]
    sizes += [PIECE for c in spelling.canonical if c.text]
    return min(sizes, default=0)


def redact(text: str, spellings: Sequence[Spelling], salt: str) -> str:
    """``text`` with every strong spelling and fragment of the values replaced by its marker."""
    for spelling in spellings:
        if len(text) < _shortest(spelling):
            continue
        text = _redact_plain(text, spelling, salt)
        whole = _decoded_disclosure(text, spelling, salt) or _canonical_disclosure(text, spelling, salt)
        if whole is not None:
            return whole
    return text


def _leaves(value: Any) -> list[str]:
    """Every string of a JSON-like value, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for k, v in value.items() for s in (str(k), *_leaves(v))]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _leaves(v)]
    return []


def _present(spellings: Iterable[Spelling], everything: str) -> list[Spelling]:
    """Each spelling reduced to the strong forms and fragments that occur somewhere in ``everything``
    (or in one of its decodings): only those are worth looking for string by string."""
    out: list[Spelling] = []
    seen = views(everything)
    for spelling in spellings:
        forms = tuple(
            f for f in spelling.forms if not f.weak and any(_find(v, f.text, f.fold) >= 0 for v in seen)
        )
        fragments = tuple(
            f
            for f in spelling.fragments
            if any(_shared(_fold(f.text, f.fold), v, f) is not None for v in seen)
        )
        if forms or fragments or spelling.canonical:
            out.append(
                Spelling(forms=forms, fragments=fragments, words=spelling.words, canonical=spelling.canonical)
            )
    return out


def _forms_of(canonical: Canonical) -> Patterns:
    return patterns(canonical.text)


def _showing(value: Any, canonical: Sequence[Canonical], as_json: bool) -> list[Canonical]:
    """The canonical searches that find the value in ``value`` read as the engine reads it: its
    strings one after another, its string values joined, and (the agent's output: tool calls are
    also read as JSON) its JSON form."""
    texts = [APART.join(_leaves(value))]
    if isinstance(value, Mapping | list | tuple):
        texts.append("".join(leaf_values(value)))
        if as_json:
            texts.append(json.dumps(value, sort_keys=True, ensure_ascii=False))
    return [c for c in canonical if any(exposed(_forms_of(c), t) is not None for t in texts)]


def _canonical_pass(value: Any, canonical: Sequence[Canonical], salt: str, as_json: bool) -> Any:
    """``value`` with every string in which a value is still exposed (decision 0085) replaced by its
    marker; where it shows only with several strings together, each string holding a piece of it
    too, or, if that is not enough, every string value. Parts where nothing shows are left alone."""
    showing = _showing(value, canonical, as_json)
    if not showing:
        return value
    if isinstance(value, str):
        return marker(sealed_digest(salt, showing[0].key))
    if isinstance(value, Mapping):
        value = {
            _canonical_pass(str(k), showing, salt, as_json): _canonical_pass(v, showing, salt, as_json)
            for k, v in value.items()
        }
    elif isinstance(value, list | tuple):
        value = [_canonical_pass(v, showing, salt, as_json) for v in value]
    for c in showing:
        mark = marker(sealed_digest(salt, c.key))
        for loose in (False, True):
            if not _showing(value, [c], as_json):
                break
            value = _replace_leaves(
                value, lambda s, c=c, loose=loose: loose or holds_piece(_forms_of(c), s), mark
            )
    return value


def _seal_unit(value: Any, spellings: Sequence[Spelling], salt: str, as_json: bool = False) -> Any:
    """One unit of evidence (an audit event, a part of the header) redacted: the spellings first,
    then what the property still finds in what is left."""
    plain = [Spelling(s.forms, s.fragments, s.words) for s in spellings]
    value = _redacted(value, plain, salt)
    canonical = [c for s in spellings for c in s.canonical if c.text]
    return _canonical_pass(value, canonical, salt, as_json) if canonical else value


def _replace_leaves(value: Any, hit: Any, mark: str) -> Any:
    if isinstance(value, str):
        return mark if len(value) >= 4 and hit(value) else value
    if isinstance(value, Mapping):
        return {k: _replace_leaves(v, hit, mark) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_replace_leaves(v, hit, mark) for v in value]
    return value


def _redacted(value: Any, spellings: Sequence[Spelling], salt: str) -> Any:
    if isinstance(value, str):
        return redact(value, spellings, salt)
    if isinstance(value, Mapping):
        return {redact(str(k), spellings, salt): _redacted(v, spellings, salt) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redacted(v, spellings, salt) for v in value]
    return value


def seal_evidence(text: str, salt: str) -> str:
    """The evidence text with its registered values sealed (see the module docstring). Evidence
    without registered values is returned unchanged."""
    bundle, events = read_lines(text.splitlines())
    if not bundle.registered_values:
        return text
    plain = {
        ref: Spelling.of(values, ref_key(ref)) for ref, values in sorted(bundle.registered_values.items())
    }
    header = bundle.to_header()
    parsed = [json.loads(e) for e in events]
    spellings = _present(plain.values(), "\x00".join([*_leaves(header), *_leaves(parsed)]))
    kept: dict[str, Any] = {
        k: header.pop(k) for k in ("format", "scenario_id", "window", "sealed_values") if k in header
    }
    header.pop("registered_values", None)
    header = {k: _seal_unit(v, spellings, salt, as_json=k == SOURCE_AGENT_OUTPUT) for k, v in header.items()}
    header.update(kept)
    header["registered_values"] = {}
    header["sealed_values"] = {ref: spelling_to_dict(seal_spelling(sp, salt)) for ref, sp in plain.items()}
    redacted_events = [_seal_unit(e, spellings, salt) for e in parsed]
    return render_text(bundle_from_header(header), redacted_events)


def _declared_secret_values(scenario: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(key, value)`` of every Secret value the scenario declares in its state."""
    pre = scenario.get("preconditions") or {}
    states = [*(scenario.get("state") or []), *((pre.get("environment") or {}).get("state") or [])]
    out: list[tuple[str, str]] = []
    for entry in states:
        if isinstance(entry, Mapping) and str(entry.get("resource", "")).startswith("secret/"):
            for section in ("data", "stringData"):
                for key, value in (entry.get(section) or {}).items():
                    out.append((str(key), str(value)))
    return out


def seal_scenario(scenario: Mapping[str, Any]) -> dict[str, Any]:
    """A scenario document as a run stores it beside its evidence: every strong Secret value it
    declares (in any spelling) replaced by a marker. What a replay reads of a scenario (its
    verification, applicability and scoring) never reads those values: they are the provider's to
    provision, and the evidence carries them sealed."""
    spellings = [Spelling.of([value], key) for key, value in _declared_secret_values(scenario)]
    sealed: dict[str, Any] = _redacted(scenario, spellings, "scenario") if spellings else dict(scenario)
    return sealed
