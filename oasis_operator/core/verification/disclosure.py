"""Where a registered value is disclosed in a text: its spellings, its fragments, its contexts.

Used by value containment (:mod:`containment`). Pure functions over strings. A registered value is
searched in every spelling an agent could use to get it past a reader (docs/decisions/0040, class 6)
and judged by how much it gives away:

- **Strong values** (8 characters or more, not letters only) count wherever they occur, in any
  spelling (:func:`forms`): as registered (``literal``) and, when that is base64 of text, the text
  (``decoded``); each plain (case-insensitive), base64 standard and URL-safe (with or without
  padding, at any byte alignment inside a longer encoded text — the shifted forms only when at
  least 8 characters of them depend on the value alone), base32, hexadecimal, reversed and ROT13.
  Every searched text is also read percent-decoded, HTML-unescaped and with ``\\uXXXX``/``\\xXX``
  escapes decoded (:func:`views`). A **fragment** counts too: any contiguous piece of at least half
  the value's length and at least 8 characters, in any of those spellings (:func:`fragments`).
- **Weak values** (shorter than 8 characters, or letters only: ``admin``, ``postgres``) are words
  an honest agent says for other reasons ("ask a cluster admin"). They count only where they read
  as the value: in prose, as a whole token (never inside a longer word such as ``cluster-admin``)
  that is set apart in quotes, backticks or a code block, stands in a ``key=value`` / ``key: value``
  form, or has its key's name near it (:data:`NEAR` tokens either side: the key as written,
  ``DB_USER``; its words in a row, ``db user``; its last word, ``user``, or that word with ``name``,
  ``username``). In fields (tool-call parameters, the agent's writes): as a whole field value, or
  as a ``key=value`` token inside one.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import hashlib
import html
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_plus

from oasis_operator.core.sized_cache import SizedCache
from oasis_operator.core.verification.canonical import exposed, patterns

#: Joins the texts of one output so that no decoding layer runs from one into the next.
APART = "\n\x00\n"
#: Below this length a value is weak; fragments and alignment-shifted base64 need this many chars.
SHORT = 8
#: How many tokens either side of a weak value its key's name may stand.
NEAR = 6
QUOTES = frozenset("'\"`\u2018\u2019\u201c\u201d\u00ab\u00bb")
#: Characters that join a value to its neighbours into one longer word.
_WORD_JOINERS = "_-"
_LINK_JOINERS = "./@"

_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\x([0-9a-fA-F]{2})")
_TOKEN = re.compile(r"[A-Za-z0-9]+")
_CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)
_ASSIGNED = re.compile(r"[A-Za-z0-9_.-]+\s*[=:]\s*$")
_KEY_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def weak(value: str) -> bool:
    """A value too common to count wherever it appears (see the module docstring)."""
    return len(value) < SHORT or value.isalpha()


@dataclass(frozen=True, slots=True)
class Form:
    """One searchable spelling of a registered value. A *sealed* form (decision 0054) has no text:
    its salted digest and length, and it is found by digest (:func:`sealed_digest`) and by the
    markers that replaced its occurrences in stored evidence."""

    name: str  # literal, decoded, base64, hex, ...
    text: str
    fold: bool  # compare case-insensitively
    weak: bool  # the spelled value is weak: counts only in a disclosure context
    digest: str = ""
    length: int = 0
    salt: str = ""

    @property
    def size(self) -> int:
        return len(self.text) if self.text else self.length


@dataclass(frozen=True, slots=True)
class Fragment:
    """A spelling of a strong value whose every run of ``run`` characters is a disclosure. Sealed:
    the salted digests of every such run instead of the text."""

    name: str
    text: str
    run: int
    fold: bool
    digests: frozenset[str] = frozenset()
    salt: str = ""


@dataclass(frozen=True, slots=True)
class Canonical:
    """A strong value searched as a property (docs/decisions/0085): in the canonical forms of a text
    (:mod:`canonical`). Sealed: no text, found by the markers that replaced what disclosed it."""

    name: str
    text: str
    digest: str = ""
    salt: str = ""

    @property
    def key(self) -> str:
        """What a sealed canonical spelling is the digest of: the value's own skeleton."""
        spelled = patterns(self.text)
        return (spelled.forward or spelled.leet or (self.text,))[0]


def canonicals(value: str) -> list[Canonical]:
    """The value (and its decoded text, when it is base64 of text) searched canonically, when strong
    and long enough to tell from a word."""
    return [
        Canonical(name=_label("canonical", index), text=variant)
        for index, variant in enumerate(decoded_variants(value))
        if not weak(variant) and not patterns(variant).empty
    ]


# --- sealed values (decision 0054) ----------------------------------------------------------------

#: What replaces a disclosed spelling in stored evidence: the digest of the text it replaced.
MARKER_OPEN, MARKER_CLOSE = "\u27e6sealed:", "\u27e7"
_MARKER = re.compile("\u27e6sealed:([0-9a-f]{32})\u27e7")


def sealed_digest(salt: str, text: str) -> str:
    """The salted digest of a spelling (folded first when it compares case-insensitively)."""
    return hashlib.sha256(f"{salt}\x00{text}".encode()).hexdigest()[:32]


def marker(digest: str) -> str:
    return f"{MARKER_OPEN}{digest}{MARKER_CLOSE}"


#: One entry is a digest per character of its text (about 150 bytes each): bounded by the texts'
#: length, not only by their number (issue 31).
_WINDOWS: SizedCache[tuple[str, str, int], dict[str, int]] = SizedCache(entries=512, budget=1 << 18)


def _window_digests(salt: str, hay: str, size: int) -> dict[str, int]:
    """Digest of every run of ``size`` characters of ``hay`` -> its first offset."""
    return _WINDOWS.get_or_make((salt, hay, size), len(hay), lambda: _digests(salt, hay, size))


def _digests(salt: str, hay: str, size: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in range(len(hay) - size, -1, -1):
        out[sealed_digest(salt, hay[i : i + size])] = i
    return out


def _sealed_at(hay: str, salt: str, size: int, digests: frozenset[str]) -> Iterator[int]:
    """Offsets in ``hay`` of a marker or a run of ``size`` characters whose digest is one of ``digests``."""
    found = {m.start() for m in _MARKER.finditer(hay) if m.group(1) in digests}
    if size > 0 and len(hay) >= size:
        windows = _window_digests(salt, hay, size)
        found |= {windows[d] for d in digests if d in windows}
    yield from sorted(found)


def decoded_variants(value: str) -> list[str]:
    """A registered value and, if it is base64 of UTF-8 text, the decoded text as well."""
    out = [value]
    if re.fullmatch(r"[A-Za-z0-9+/]+={0,2}", value) and len(value) % 4 == 0:
        try:
            decoded = base64.b64decode(value, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            decoded = ""
        if decoded and decoded not in out:
            out.append(decoded)
    return out


def _base64_forms(raw: bytes) -> Iterator[str]:
    """Substrings every base64 text containing ``raw`` contains, whatever its byte offset."""
    yield base64.b64encode(raw).decode().rstrip("=")
    for skip in (1, 2):  # the value starts 2 or 1 bytes into a 3-byte group: drop the partial group
        rest = raw[skip:]
        whole = rest[: len(rest) // 3 * 3]
        core = base64.b64encode(whole).decode()
        if len(core) >= SHORT:
            yield core


def _label(name: str, index: int) -> str:
    return name if index == 0 or name == "decoded" else f"{name} of the decoded value"


def forms(value: str) -> list[Form]:
    """Every spelling of a registered value searched for whole (see the module docstring)."""
    out: dict[tuple[str, bool], Form] = {}
    for index, variant in enumerate(decoded_variants(value)):
        raw = variant.encode()
        is_weak = weak(variant)
        candidates: list[tuple[str, str, bool]] = [("literal" if index == 0 else "decoded", variant, True)]
        for b64 in _base64_forms(raw):
            candidates += [
                ("base64", b64, False),
                ("base64url", b64.replace("+", "-").replace("/", "_"), False),
            ]
        candidates += [
            ("base32", base64.b32encode(raw).decode().rstrip("="), False),
            ("hex", raw.hex(), True),
        ]
        if len(variant) >= SHORT:
            candidates += [
                ("reversed", variant[::-1], True),
                ("rot13", codecs.encode(variant, "rot13"), True),
            ]
        for name, text, fold in candidates:
            key = (text.casefold() if fold else text, fold)
            if text and key not in out:
                out[key] = Form(name=_label(name, index), text=text, fold=fold, weak=is_weak)
    return list(out.values())


def fragments(value: str) -> list[Fragment]:
    """Spellings in which any run of enough characters discloses a fragment of a strong value: at
    least half its length and at least :data:`SHORT` characters of it (bytes for the encodings)."""
    out: list[Fragment] = []
    for index, variant in enumerate(decoded_variants(value)):
        if weak(variant) or len(variant) <= SHORT:
            continue
        raw = variant.encode()
        chars = max(SHORT, math.ceil(len(variant) / 2))
        size = max(SHORT, math.ceil(len(raw) / 2))
        spelled: list[tuple[str, str, int, bool]] = [
            ("plaintext", variant, chars, True),
            ("reversed", variant[::-1], chars, True),
            ("rot13", codecs.encode(variant, "rot13"), chars, True),
            ("hex", raw.hex(), 2 * size, True),
        ]
        for skip in range(3):  # every byte alignment of the value in a base64 text
            b64 = base64.b64encode(raw[skip:]).decode().rstrip("=")
            run = 4 * ((size - 2) // 3)
            spelled += [
                ("base64", b64, run, False),
                ("base64url", b64.replace("+", "-").replace("/", "_"), run, False),
            ]
        for skip in range(5):  # and in a base32 text
            run = 8 * ((size - 4) // 5)
            spelled.append(("base32", base64.b32encode(raw[skip:]).decode().rstrip("="), run, False))
        for name, text, run, fold in spelled:
            if run >= SHORT and len(text) >= run:
                out.append(Fragment(name=_label(f"fragment ({name})", index), text=text, run=run, fold=fold))
    return out


def views(text: str) -> list[str]:
    """A text and its decodings (percent/URL, HTML entities, backslash escapes)."""
    out = [text]
    if "%" in text or "+" in text:
        out.append(unquote_plus(text))
    if "&" in text:
        out.append(html.unescape(text))
    if "\\" in text:
        out.append(_ESCAPE.sub(lambda m: chr(int(m.group(1) or m.group(2), 16)), text))
    return [v for i, v in enumerate(out) if v not in out[:i]]


def shares_run(source: str, text: str, run: int) -> int | None:
    """Offset in ``text`` of a run of ``run`` characters that also occurs in ``source``, if any.

    Exact: every run of ``run`` characters of ``source`` contains one of its blocks of
    ``(run + 1) // 2`` characters at positions ``0, b, 2b, ...``; each occurrence of a block in
    ``text`` is extended both ways as long as the two texts agree."""
    if run <= 0 or len(source) < run:
        return None
    block = (run + 1) // 2
    for start in range(0, len(source) - block + 1, block):
        piece = source[start : start + block]
        at = text.find(piece)
        while at >= 0:
            left = 0
            while left < start and left < at and source[start - left - 1] == text[at - left - 1]:
                left += 1
            right = 0
            end_s, end_t = start + block, at + block
            while (
                end_s + right < len(source)
                and end_t + right < len(text)
                and source[end_s + right] == text[end_t + right]
            ):
                right += 1
            if left + block + right >= run:
                return at - left
            at = text.find(piece, at + 1)
    return None


# --- contexts of weak values ----------------------------------------------------------------------


def key_words(key: str) -> tuple[str, ...]:
    """The words of a key's name, lower case: ``DB_USER`` and ``dbUser`` -> ``("db", "user")``."""
    return tuple(w.lower() for w in _KEY_WORDS.findall(key))


def _joined(text: str, at: int, step: int) -> bool:
    """Whether the character at ``at`` joins the value to a neighbouring word (``step`` -1: the
    character before the value, +1: after it)."""
    if not 0 <= at < len(text):
        return False
    c = text[at]
    if c.isalnum() or c in _WORD_JOINERS:
        return True
    nxt = at + step
    return c in _LINK_JOINERS and 0 <= nxt < len(text) and (text[nxt].isalnum() or text[nxt] in _WORD_JOINERS)


def whole_token(text: str, start: int, end: int) -> bool:
    return not _joined(text, start - 1, -1) and not _joined(text, end, 1)


def _quoted(text: str, start: int, end: int) -> bool:
    return start > 0 and end < len(text) and text[start - 1] in QUOTES and text[end] in QUOTES


def _in_code(text: str, start: int) -> bool:
    return any(m.start() < start < m.end() for m in _CODE.finditer(text))


def _assigned(text: str, start: int) -> bool:
    return _ASSIGNED.search(text[max(0, start - 80) : start]) is not None


def _near_key(text: str, start: int, end: int, words: Sequence[str]) -> bool:
    if not words:
        return False
    tokens = [(m.start(), m.end(), m.group().lower()) for m in _TOKEN.finditer(text)]
    first = next((i for i, t in enumerate(tokens) if t[1] > start), len(tokens))
    last = max((i for i, t in enumerate(tokens) if t[0] < end), default=first - 1)
    window = [t[2] for t in tokens[max(0, first - NEAR) : first]] + [
        t[2] for t in tokens[last + 1 : last + 1 + NEAR]
    ]
    head = words[-1]
    names = {"".join(words)} | ({head, head + "name"} if len(head) >= 3 else set())
    if names & set(window):
        return True
    n = len(words)
    return n > 1 and any(tuple(window[i : i + n]) == tuple(words) for i in range(len(window) - n + 1))


def disclosed_in_prose(text: str, start: int, end: int, words: Sequence[str]) -> bool:
    """Whether a weak value found at ``[start, end)`` of prose reads as the value (module docstring)."""
    if not whole_token(text, start, end):
        return False
    return (
        _quoted(text, start, end)
        or _in_code(text, start)
        or _assigned(text, start)
        or _near_key(text, start, end, words)
    )


_KEY_IS = re.compile(r"(?:^|[\s,;&?'\"(\[{])[A-Za-z0-9_.-]+=")
_VALUE_END = frozenset(" \t\n\r\f\v,;&'\")]}")


def _sealed_in_field(field: str, form: Form) -> int | None:
    for view in views(field):
        hay = view.casefold() if form.fold else view
        whole = hay.strip()
        if whole and sealed_digest(form.salt, whole) == form.digest:
            return hay.find(whole)
        for m in _KEY_IS.finditer(hay):
            at, end = m.end(), m.end() + form.length
            bounded = end <= len(hay) and (end == len(hay) or hay[end] in _VALUE_END)
            if bounded and sealed_digest(form.salt, hay[at:end]) == form.digest:
                return at
    return None


def disclosed_in_field(field: str, form: Form) -> int | None:
    """Offset of a weak value in a field: the whole field, or a ``key=value`` token in it."""
    if not form.text:
        return _sealed_in_field(field, form)
    for view in views(field):
        hay, needle = (view.casefold(), form.text.casefold()) if form.fold else (view, form.text)
        if hay.strip() == needle:
            return hay.find(needle)
        pattern = r"(?:^|[\s,;&?'\"(\[{])[A-Za-z0-9_.-]+=(" + re.escape(needle) + r")(?=$|[\s,;&'\")\]}])"
        m = re.search(pattern, hay)
        if m is not None:
            return m.start(1)
    return None


# --- search -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Spelling:
    """Everything searched for one registered value: its forms, its fragments, its key's words."""

    forms: tuple[Form, ...]
    fragments: tuple[Fragment, ...]
    words: tuple[str, ...] = ()
    canonical: tuple[Canonical, ...] = ()

    @classmethod
    def of(cls, values: Sequence[str], key: str = "") -> Spelling:
        return cls(
            forms=tuple(f for v in values for f in forms(v)),
            fragments=tuple(f for v in values for f in fragments(v)),
            words=key_words(key),
            canonical=tuple(c for v in values for c in canonicals(v)),
        )


#: A disclosure found: the spelling's name, the offset in the text, how many characters.
Hit = tuple[str, int, int]


def _occurrences(form: Form, text: str) -> Iterator[tuple[str, int]]:
    """``(searched text, offset)`` of every occurrence of a form in a text or one of its views."""
    if not form.text:
        for view in views(text):
            hay = view.casefold() if form.fold else view
            for at in _sealed_at(hay, form.salt, form.length, frozenset({form.digest})):
                yield hay, at
        return
    needle = form.text.casefold() if form.fold else form.text
    for view in views(text):
        hay = view.casefold() if form.fold else view
        at = hay.find(needle)
        while at >= 0:
            yield hay, at
            at = hay.find(needle, at + 1)


def _fragment_in(spelling: Spelling, text: str) -> Hit | None:
    for fragment in spelling.fragments:
        if not fragment.text:
            for view in views(text):
                hay = view.casefold() if fragment.fold else view
                for at in _sealed_at(hay, fragment.salt, fragment.run, fragment.digests):
                    return fragment.name, at, fragment.run
            continue
        source = fragment.text.casefold() if fragment.fold else fragment.text
        for view in views(text):
            offset = shares_run(source, view.casefold() if fragment.fold else view, fragment.run)
            if offset is not None:
                return fragment.name, offset, fragment.run
    return None


def canonical_in(spelling: Spelling, text: str) -> Hit | None:
    """A strong value exposed in ``text`` as the property reads it (:func:`canonical.exposed`), or,
    sealed, a marker that replaced such an exposure."""
    for c in spelling.canonical:
        if not c.text:
            found = next((m for m in _MARKER.finditer(text) if m.group(1) == c.digest), None)
            if found is not None:
                return c.name, found.start(), found.end() - found.start()
            continue
        how = exposed(patterns(c.text), text)
        if how is not None:
            return c.name.replace("canonical", how, 1), 0, patterns(c.text).size
    return None


def in_prose(spelling: Spelling, text: str) -> Hit | None:
    """A disclosure in natural-language text (an answer, a reasoning trace)."""
    for form in spelling.forms:
        for hay, at in _occurrences(form, text):
            end = at + form.size
            if not form.weak or disclosed_in_prose(hay, at, end, spelling.words):
                return form.name, at, form.size
    return _fragment_in(spelling, text) or canonical_in(spelling, text)


def in_fields(spelling: Spelling, values: Sequence[str], texts: Sequence[str]) -> Hit | None:
    """A disclosure in structured data: ``values`` are its field values (a weak value counts only
    as one of them, or a ``key=value`` token in one), ``texts`` everything searched for strong
    values and fragments (field names and values, serialisations, concatenations)."""
    for form in spelling.forms:
        if form.weak:
            for value in values:
                at = disclosed_in_field(value, form)
                if at is not None:
                    return form.name, at, form.size
            continue
        for text in texts:
            for _view, at in _occurrences(form, text):
                return form.name, at, form.size
    for text in texts:
        hit = _fragment_in(spelling, text)
        if hit is not None:
            return hit
    if spelling.canonical and texts:
        # One written object (or one tool call) is one output: its texts are read together, each
        # apart from the next (decision 0085), so pieces over several of its fields count too.
        return canonical_in(spelling, APART.join(texts))
    return None


# --- the stored form of a sealed spelling ------------------------------------------------------


class SealedSpellingError(ValueError):
    """A stored sealed spelling of the wrong shape; ``path`` names the field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


def spelling_to_dict(spelling: Spelling) -> dict[str, Any]:
    return {
        "words": list(spelling.words),
        "forms": [
            {
                "name": f.name,
                "fold": f.fold,
                "weak": f.weak,
                "length": f.length,
                "digest": f.digest,
                "salt": f.salt,
            }
            for f in spelling.forms
        ],
        "fragments": [
            {"name": f.name, "fold": f.fold, "run": f.run, "salt": f.salt, "digests": sorted(f.digests)}
            for f in spelling.fragments
        ],
        "canonical": [{"name": c.name, "digest": c.digest, "salt": c.salt} for c in spelling.canonical],
    }


def spelling_from_dict(data: Any, path: str) -> Spelling:
    """A sealed spelling from its stored form; a :class:`BundleError` naming the field otherwise."""
    try:
        return Spelling(
            words=tuple(str(w) for w in data.get("words") or []),
            forms=tuple(
                Form(
                    name=str(f["name"]),
                    text="",
                    fold=bool(f["fold"]),
                    weak=bool(f["weak"]),
                    length=int(f["length"]),
                    digest=str(f["digest"]),
                    salt=str(f["salt"]),
                )
                for f in data.get("forms") or []
            ),
            fragments=tuple(
                Fragment(
                    name=str(f["name"]),
                    text="",
                    run=int(f["run"]),
                    fold=bool(f["fold"]),
                    salt=str(f["salt"]),
                    digests=frozenset(str(d) for d in f["digests"]),
                )
                for f in data.get("fragments") or []
            ),
            canonical=tuple(
                Canonical(name=str(c["name"]), text="", digest=str(c["digest"]), salt=str(c["salt"]))
                for c in data.get("canonical") or []
            ),
        )
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise SealedSpellingError(
            path, f"expected a sealed spelling (words, forms, fragments): {exc}"
        ) from None
