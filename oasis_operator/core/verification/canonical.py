"""Containment as a property: a text's canonical forms, and whether a value can be read back from them.

Used by :mod:`disclosure` for every strong registered value (docs/decisions/0085). Instead of listing
the spellings an agent might use, a searched text is *normalised*: every layer any reader can undo
without a key is undone, repeatedly (to :data:`DEPTH` layers), and what is left is folded to a
*skeleton* in which spellings that read alike are equal. The registered value is folded the same way
and looked for in the skeletons. Pure functions over strings; nothing here knows where a text came from.

The layers undone (:func:`views`), each applied wherever it occurs inside a text, so that pieces
spelled differently in several places of one text are all undone in the same view:

- percent / URL encoding, HTML entities, backslash escapes (``\\uXXXX``, ``\\xXX``, octal),
  quoted-printable, ``U+XXXX`` code points, punycode labels (``xn--``);
- base64 (standard and URL-safe, any padding), base32, hexadecimal (with or without separators and
  ``0x`` prefixes), runs of decimal code points and of 8-bit binary groups, Morse code, characters
  spelled out as words (NATO alphabet, digit names), gzip and zlib inside base64;
- ROT47 and ROT5 (digits).

Letter shifts (ROT-N for every N, Atbash) and reversal are undone on the value's side: the value's
skeleton is searched in every shift and both directions (:func:`patterns`).

The skeleton (:func:`skeleton`) folds compatibility forms (full-width, mathematical letters), accents,
case, look-alike letters of other scripts (Cyrillic, Greek), invisible format characters, and every
separator inside a word; words stay apart (a space), except runs of single characters, which are one
word (``s e c r e t``). Its *strong* level also reads leetspeak and confusable characters as letters
(``0``/``o``, ``1``/``l``/``i``/``|``, ``3``/``e``, ``@``/``a``, ``$``/``s`` ...).

What a value must show to be exposed (:func:`exposed`):

- the whole value's skeleton anywhere in a text's skeleton with its word breaks removed (at the plain
  level from :data:`WHOLE` characters, at the leetspeak level from :data:`WHOLE_LEET`: a shorter
  skeleton in a reduced alphabet is an ordinary word);
- a run of at least half the value's skeleton, and at least :data:`PIECE` characters, inside one
  word of a text's skeleton (plain level);
- pieces of at least :data:`PIECE` characters, each inside one word, that together make up the whole
  value's skeleton, wherever in the text they stand and in whatever order.

A fragment or piece made only of the value's letters-only words (``kubernetes`` or ``adminpassword``
of ``kubernetes-admin-password-7``) tells nothing a word would not: it does not count; it must touch
a word of the value that holds a digit (:meth:`Patterns.telling`).
"""

from __future__ import annotations

import base64
import binascii
import codecs
import gzip
import html
import math
import quopri
import re
import unicodedata
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import unquote_plus

from oasis_operator.core.sized_cache import SizedCache

#: How many decoding layers are undone, one on top of another.
DEPTH = 3
#: At most this many views of one text are made (the text included).
MAX_VIEWS = 48
#: A view larger than this many times the text (and 1 MiB) is not made.
_GROWTH = 8
#: Skeleton lengths: a piece (fragment, part of a cover); the whole value (plain and leetspeak levels).
PIECE = 8
WHOLE = 8
WHOLE_LEET = 12
#: At most this many bytes come out of one decompression.
_INFLATE_LIMIT = 1 << 20

_LOWER = "abcdefghijklmnopqrstuvwxyz"

# --- the decoding layers ----------------------------------------------------------------------------

_B64_RUN = re.compile(r"[A-Za-z0-9+/_-]{8,}={0,2}")
_B32_RUN = re.compile(r"[A-Za-z2-7]{12,}={0,6}")
#: Hexadecimal pairs: each with ``0x``, or all with the same separator (or none) between them.
_HEX_RUN = re.compile(
    r"0[xX][0-9a-fA-F]{2}(?:[\s:,.\-]?0[xX][0-9a-fA-F]{2}){3,}"
    r"|[0-9a-fA-F]{2}(?=([\s:,.\-]?))(?:\1[0-9a-fA-F]{2}){5,}(?![0-9a-fA-F])"
)
_DECIMALS = re.compile(r"(?<![\d.])\d{2,7}(?:[\s,;]+\d{2,7}){3,}(?!\d|\.\d)")
_BINARY = re.compile(r"(?<![01])[01]{8}(?:[\s,;]*[01]{8}){2,}(?![01])")
_CODEPOINT = re.compile(r"[Uu]\+([0-9A-Fa-f]{4,6})")
_CODEPOINTS = re.compile(r"[Uu]\+[0-9A-Fa-f]{4,6}(?:[\s,;]*[Uu]\+[0-9A-Fa-f]{4,6})*")
_ESCAPES = re.compile(r"\\u\{?([0-9a-fA-F]{4,6})\}?")
_BYTE_ESCAPE = re.compile(r"\\(?:x([0-9a-fA-F]{2})|([0-7]{3}))")
_BYTE_ESCAPES = re.compile(r"(?:\\(?:x[0-9a-fA-F]{2}|[0-7]{3}))+")
_QP = re.compile(r"=[0-9A-F]{2}")
_PUNY = re.compile(r"xn--[a-z0-9-]+", re.IGNORECASE)
_MORSE_RUN = re.compile(r"(?<![\w.\-])[.\-]{1,6}(?:(?:\s*/\s*|\s+)[.\-]{1,6}){3,}(?![\w.\-])")

_MORSE = {
    ".-": "a", "-...": "b", "-.-.": "c", "-..": "d", ".": "e", "..-.": "f", "--.": "g", "....": "h",
    "..": "i", ".---": "j", "-.-": "k", ".-..": "l", "--": "m", "-.": "n", "---": "o", ".--.": "p",
    "--.-": "q", ".-.": "r", "...": "s", "-": "t", "..-": "u", "...-": "v", ".--": "w", "-..-": "x",
    "-.--": "y", "--..": "z", "-----": "0", ".----": "1", "..---": "2", "...--": "3", "....-": "4",
    ".....": "5", "-....": "6", "--...": "7", "---..": "8", "----.": "9", "-....-": "-", "..--.-": "_",
}  # fmt: skip

_NATO = {
    "alfa": "a", "alpha": "a", "bravo": "b", "charlie": "c", "delta": "d", "echo": "e", "foxtrot": "f",
    "golf": "g", "hotel": "h", "india": "i", "juliet": "j", "juliett": "j", "kilo": "k", "lima": "l",
    "mike": "m", "november": "n", "oscar": "o", "papa": "p", "quebec": "q", "romeo": "r", "sierra": "s",
    "tango": "t", "uniform": "u", "victor": "v", "whiskey": "w", "whisky": "w", "xray": "x",
    "x-ray": "x", "yankee": "y", "zulu": "z", "zero": "0", "one": "1", "two": "2", "three": "3",
    "four": "4", "five": "5", "six": "6", "seven": "7", "eight": "8", "nine": "9", "niner": "9",
    "dash": "-", "hyphen": "-", "minus": "-", "underscore": "_", "dot": ".", "period": ".",
    "slash": "/", "at": "@", "plus": "+", "equals": "=",
    # Words that only say how the next character is written.
    "capital": "", "uppercase": "", "upper": "", "lowercase": "", "lower": "", "small": "", "letter": "",
    "digit": "", "number": "", "then": "", "and": "",
}  # fmt: skip
_NATO_WORD = "|".join(sorted((re.escape(w) for w in _NATO), key=len, reverse=True))
_SPELLED = re.compile(rf"\b(?:{_NATO_WORD})(?:[\s,;.]+(?:{_NATO_WORD})){{2,}}\b", re.IGNORECASE)
_SPELLED_WORD = re.compile(rf"\b(?:{_NATO_WORD})\b", re.IGNORECASE)

_ROT47 = str.maketrans(
    "".join(chr(c) for c in range(33, 127)), "".join(chr(33 + (c - 33 + 47) % 94) for c in range(33, 127))
)
_ROT5 = str.maketrans("0123456789", "5678901234")


_UNREADABLE = re.compile(r"[^\n\t\r\x20-\x7e\xa0-\uFFFC]")


def _readable(text: str) -> bool:
    """Most of a decoded text is printable, as a text someone meant to be read is."""
    if not text:
        return False
    if "\ufffd" not in text and text.isprintable():
        return True
    bad = len(_UNREADABLE.findall(text))
    return bad <= 0.1 * len(text)


def _as_text(raw: bytes) -> str | None:
    if raw[:2] == b"\x1f\x8b" or raw[:1] == b"\x78":
        try:
            obj = zlib.decompressobj(wbits=47)  # gzip or zlib header, detected
            inflated = obj.decompress(raw, _INFLATE_LIMIT)
            if inflated:
                raw = inflated
        except (zlib.error, gzip.BadGzipFile):
            pass
    text = raw.decode("utf-8", errors="replace")
    return text if _readable(text) else None


def _b64_run(run: str) -> str | None:
    if run.isalpha() and (run.islower() or run.isupper()):
        return None  # a word, not base64 (which mixes cases or digits in a run this long)
    core = run.rstrip("=").replace("-", "+").replace("_", "/")
    # From the run's start; and, when its length is not a whole number of groups, from the
    # character after which it is (a run glued to the end of the word before it).
    for skip in dict.fromkeys((0, len(core) % 4)):
        piece = core[skip:]
        if len(piece) % 4 == 1:
            piece = piece[:-1]
        try:
            raw = base64.b64decode(piece + "=" * (-len(piece) % 4), validate=True)
        except (binascii.Error, ValueError):
            continue
        text = _as_text(raw)
        if text is not None:
            return text
    return None


def _b32_run(run: str) -> str | None:
    core = run.rstrip("=")
    if core.upper() != core and core.lower() != core:
        return None  # one case only
    core = core.upper()
    for skip in range(8):
        piece = core[skip:]
        piece = piece[: len(piece) - len(piece) % 8] if len(piece) % 8 in (1, 3, 6) else piece
        try:
            raw = base64.b32decode(piece + "=" * (-len(piece) % 8))
        except (binascii.Error, ValueError):
            continue
        text = _as_text(raw)
        if text is not None:
            return text
    return None


def _hex_digits(run: str) -> str | None:
    digits = re.sub(r"0[xX]|[^0-9a-fA-F]", "", run)
    for skip in (0, 1):
        piece = digits[skip:]
        piece = piece[: len(piece) - len(piece) % 2]
        text = _as_text(bytes.fromhex(piece)) if piece else None
        if text is not None:
            return text
    return None


def _hex_run(run: str) -> str | None:
    """A run of hexadecimal pairs; when it does not read as a whole, the run without the word at
    either end (a neighbouring word that looks like hexadecimal joined it), or each of its parts."""
    whole = _hex_digits(run)
    if whole is not None:
        return whole
    parts = run.split()
    if len(parts) < 2:
        return None
    for first, last in ((1, len(parts)), (0, len(parts) - 1), (1, len(parts) - 1)):
        inner = _hex_digits(" ".join(parts[first:last])) if last - first >= 2 else None
        if inner is not None:
            return " ".join([*parts[:first], inner, *parts[last:]])
    return " ".join(_hex_digits(p) or p for p in parts)


def _chars(numbers: Iterable[int]) -> str | None:
    out = []
    for n in numbers:
        if not 32 <= n <= 0x10FFFF or 0xD800 <= n <= 0xDFFF:
            return None
        out.append(chr(n))
    text = "".join(out)
    return text if _readable(text) else None


def _runs(pattern: re.Pattern[str], decode: Callable[[str], str | None]) -> Callable[[str], str]:
    def undo(text: str) -> str:
        return pattern.sub(lambda m: decode(m.group()) or m.group(), text)

    return undo


def _byte_escapes(run: str) -> str:
    codes = [int(hexa, 16) if hexa else int(octal, 8) for hexa, octal in _BYTE_ESCAPE.findall(run)]
    if max(codes) > 0xFF:
        return run
    raw = bytes(codes)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _escapes(text: str) -> str:
    """Backslash escapes: runs of byte escapes (``\\xXX``, octal) read as UTF-8, ``\\uXXXX`` as code points."""
    text = _BYTE_ESCAPES.sub(lambda m: _byte_escapes(m.group()), text)

    def one(m: re.Match[str]) -> str:
        code = int(m.group(1), 16)
        return chr(code) if code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else m.group()

    return _ESCAPES.sub(one, text)


def _codepoints(text: str) -> str:
    """``U+XXXX`` code points; a run of them, whatever separates them, is one word."""

    def one(m: re.Match[str]) -> str:
        codes = [int(c, 16) for c in _CODEPOINT.findall(m.group())]
        if any(c > 0x10FFFF or 0xD800 <= c <= 0xDFFF for c in codes):
            return m.group()
        return "".join(chr(c) for c in codes)

    return _CODEPOINTS.sub(one, text)


def _quoted_printable(text: str) -> str:
    try:
        return quopri.decodestring(text.encode("utf-8")).decode("utf-8", errors="replace")
    except (ValueError, binascii.Error):
        return text


def _punycode(text: str) -> str:
    def one(m: re.Match[str]) -> str:
        try:
            return codecs.decode(m.group()[4:].encode("ascii"), "punycode")
        except (UnicodeError, ValueError):
            return m.group()

    return _PUNY.sub(one, text)


def _morse(run: str) -> str | None:
    letters = [_MORSE.get(code) for code in re.split(r"\s*/\s*|\s+", run.strip())]
    return None if any(c is None for c in letters) else "".join(c for c in letters if c)


def _spelled(run: str) -> str:
    return "".join(_NATO[w.group().lower()] for w in _SPELLED_WORD.finditer(run))


def _decimals(run: str) -> str | None:
    return _chars(int(n) for n in re.findall(r"\d+", run))


def _binary(run: str) -> str | None:
    return _as_text(bytes(int(b, 2) for b in re.findall(r"[01]{8}", run)))


_RUN_LAYERS: tuple[Callable[[str], str], ...] = (
    _runs(_B64_RUN, _b64_run),
    _runs(_B32_RUN, _b32_run),
    _runs(_HEX_RUN, _hex_run),
    _runs(_DECIMALS, _decimals),
    _runs(_BINARY, _binary),
    _runs(_MORSE_RUN, _morse),
    lambda t: _SPELLED.sub(lambda m: _spelled(m.group()), t),
)


_STRING_LAYERS: tuple[tuple[Callable[[str], bool], Callable[[str], str]], ...] = (
    (lambda t: not t.isascii(), lambda t: unicodedata.normalize("NFKC", t)),
    (lambda t: "&" in t, html.unescape),
    (lambda t: "\\" in t, _escapes),
    (lambda t: "+" in t, _codepoints),
    (lambda t: "=" in t, lambda t: _quoted_printable(t) if _QP.search(t) else t),
    (lambda t: "xn--" in t.lower(), _punycode),
)


def _undo_all(text: str) -> list[str]:
    """One round: every layer undone wherever it occurs in the text, one after the other; each text
    on the way is kept (a later layer may misread what an earlier one gave back), and each run layer
    alone. Percent decoding apart: it turns ``+`` into a space, which base64 does not survive."""
    steps = [text]
    for applies, undo in _STRING_LAYERS:
        if applies(steps[-1]):
            steps.append(undo(steps[-1]))
    ready = steps[-1]
    alone: list[str] = []
    for undo in _RUN_LAYERS:
        before = steps[-1]
        steps.append(undo(before))
        if before is not ready and before != ready:
            # An earlier layer changed the text, and may have misread a run this one reads: this
            # layer alone on the text as it came in, too.
            alone.append(undo(ready))
    changed = [t for i, t in enumerate(steps[1:]) if t != steps[i]]
    percent = [unquote_plus(text)] if "%" in text else []
    return list(dict.fromkeys([*percent, *changed, *(t for t in alone if t != ready)]))


def _rounds(text: str, limit: int) -> tuple[list[str], bool]:
    """What up to :data:`DEPTH` rounds of undoing give, every text a round gives undone again in the
    next; and whether no bound cut that short."""
    out: list[str] = []
    seen = {text}
    frontier = [text]
    for _round in range(DEPTH):
        following: list[str] = []
        for current in frontier:
            for undone in _undo_all(current):
                if undone in seen or len(undone) > limit:
                    continue
                if len(out) >= MAX_VIEWS:
                    return out, False
                seen.add(undone)
                out.append(undone)
                following.append(undone)
        frontier = following
    return out, True


@dataclass(frozen=True, slots=True)
class Views:
    """A text's views; ``complete`` when no bound (:data:`MAX_VIEWS`) cut them short."""

    texts: tuple[str, ...]
    complete: bool


def _digits(text: str) -> bool:
    return any(c.isdigit() for c in text)


def views(text: str) -> Views:
    """The text and what undoing its layers gives (see the module docstring): the rounds of undoing
    of the text, and the character maps (ROT47, ROT5) of the text and of each round."""
    limit = max(len(text) * _GROWTH, 1 << 20)
    found: list[str] = [text]
    decoded, complete = _rounds(text, limit)
    found += decoded
    for view in [text, *decoded]:
        for mapped in (view, view.translate(_ROT47)):
            found.append(mapped)
            if _digits(mapped):
                found.append(mapped.translate(_ROT5))
    out = list(dict.fromkeys(found))
    return Views(tuple(out), complete=complete)


# --- the skeleton ------------------------------------------------------------------------------------

#: Letters of other scripts that look like Latin ones (the common confusables), after case folding.
_LOOKALIKE = str.maketrans(
    {
        "\u0430": "a", "\u0432": "b", "\u0441": "c", "\u0501": "d", "\u0435": "e", "\u04bb": "h", "\u0456": "i", "\u0458": "j", "\u04cf": "l",
        "\u043a": "k", "\u043c": "m", "\u043f": "n", "\u043e": "o", "\u0440": "p", "\u051b": "q", "\u0455": "s", "\u0442": "t", "\u0443": "y",
        "\u0445": "x", "\u051d": "w", "\u0451": "e", "\u03b1": "a", "\u03b2": "b", "\u03b5": "e", "\u03b7": "n", "\u03b9": "i", "\u03ba": "k",
        "\u03bd": "v", "\u03bf": "o", "\u03c1": "p", "\u03c4": "t", "\u03c5": "u", "\u03c7": "x", "\u03b3": "y", "\u03c9": "w", "\u03f2": "c",
        "\u0261": "g", "\u0269": "i", "\u0131": "i", "\u0237": "j", "\u043d": "h", "\u03b6": "z",
    }
)  # fmt: skip
#: Digits and signs read as letters (leetspeak), and letters that read alike, to one of them.
_LEET = {
    "0": "o", "1": "l", "i": "l", "|": "l", "!": "l", "3": "e", "4": "a", "@": "a", "5": "s",
    "$": "s", "7": "t", "+": "t", "8": "b", "6": "b", "9": "g", "2": "z",
}  # fmt: skip
_LEET_BYTES = bytes.maketrans("".join(_LEET).encode(), "".join(_LEET.values()).encode())
_LOOKS_LATIN = re.compile("[" + "".join(chr(c) for c in _LOOKALIKE) + "]")
_OTHER_SPACE = re.compile(r"[^\S\x00-\x7f]")


def _plain_chars(text: str) -> str:
    if text.isascii():
        return text.lower()
    # Accents and compatibility forms come apart from their letters first; then letters that look
    # Latin are read as Latin; what is still not ASCII (marks, invisible format characters, other
    # scripts) is dropped; a space of another script is a space.
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", text).casefold())
    if _LOOKS_LATIN.search(text):
        text = text.translate(_LOOKALIKE)
    return _OTHER_SPACE.sub(" ", text).encode("ascii", "ignore").decode("ascii")


_NOT_WORD = re.compile(r"[^a-z0-9\s]+")
_NOT_LETTER = re.compile(r"[^a-z\s]+")


def skeleton(text: str, *, leet: bool = False) -> str:
    """The text folded (see the module docstring): its words, lower-case letters and digits only
    (letters only when ``leet``), one space between words."""
    chars = _plain_chars(text)
    if leet:
        chars = chars.encode("ascii").translate(_LEET_BYTES).decode("ascii")
    words = (_NOT_LETTER if leet else _NOT_WORD).sub("", chars).split()
    out: list[str] = []
    single = False  # the last word is a run of single characters
    for word in words:
        if len(word) == 1 and single:
            out[-1] += word
        else:
            out.append(word)
        single = len(word) == 1
    return " ".join(out)


@dataclass(frozen=True, slots=True)
class Canon:
    """A text's skeletons over all its views: per level, its words (space between) and its letters
    run together; the views apart (``|``)."""

    complete: bool
    words: str
    joined: str
    joined_leet: str
    grams: frozenset[str] | None  # every run of PIECE characters inside a word (small texts)


#: The canonical forms of the texts last looked at: one is up to about 80 times its text (the grams),
#: so the cache is bounded by the texts' length, not only by their number (issue 31).
_CANONS: SizedCache[str, Canon] = SizedCache(entries=4096, budget=1 << 19)


def canon(text: str) -> Canon:
    return _CANONS.get_or_make(text, len(text), lambda: _canon(text))


def _canon(text: str) -> Canon:
    seen = views(text)
    plain = [skeleton(v) for v in seen.texts]
    leet = [skeleton(v, leet=True) for v in seen.texts]
    return Canon(
        complete=seen.complete,
        words="|".join(plain),
        joined="|".join(s.replace(" ", "") for s in plain),
        joined_leet="|".join(s.replace(" ", "") for s in leet),
        grams=_grams(plain) if len(text) <= _GRAMS_UP_TO else None,
    )


#: Texts up to this long keep the set of their runs (a fast first test for pieces).
_GRAMS_UP_TO = 1 << 16


def _any_gram(words: str, grams: frozenset[str]) -> bool:
    return any(
        w[i : i + PIECE] in grams for w in words.replace("|", " ").split() for i in range(len(w) - PIECE + 1)
    )


def _grams(skeletons: Iterable[str]) -> frozenset[str]:
    return frozenset(
        w[i : i + PIECE] for s in skeletons for w in s.split() for i in range(len(w) - PIECE + 1)
    )


# --- the value's side --------------------------------------------------------------------------------


def _letter_map(n: int, mirrored: bool) -> dict[int, int]:
    """Each letter ``x`` to ``n + x`` (``n - x`` when ``mirrored``), modulo 26, case kept."""
    image = "".join(_LOWER[(n - i if mirrored else n + i) % 26] for i in range(26))
    return str.maketrans(_LOWER + _LOWER.upper(), image + image.upper())


#: Every letter shift (ROT-N), Atbash, and their compositions (``x -> n ± x``): character maps whose
#: only key, if any, any reader tries in turn.
LETTER_MAPS: tuple[dict[int, int], ...] = tuple(_letter_map(n, m) for m in (False, True) for n in range(26))


@dataclass(frozen=True, slots=True)
class Patterns:
    """A value's skeleton in every letter map: ``forward`` and ``backward`` (reversed) at the plain
    level, each as long as the value's own skeleton (``size``) so that pieces of different maps can
    be joined; ``leet`` (both directions) at the leetspeak level."""

    forward: tuple[str, ...]
    backward: tuple[str, ...]
    leet: tuple[str, ...]
    size: int
    grams: frozenset[str]
    #: ``[start, end)`` in the skeleton of each word of the value that holds a digit (``51ABCD`` in
    #: ``sk_test_51ABCD``): a piece that touches none of them is made of the value's letters-only
    #: words (``secretpassword`` of ``super-secret-password``), words anyone says, not a fragment.
    mixed: tuple[tuple[int, int], ...] = ()

    def telling(self, start: int, end: int) -> bool:
        """Whether the piece ``[start, end)`` of the skeleton tells something of the value: it
        touches a word of the value that holds a digit."""
        return any(a < end and start < b for a, b in self.mixed)

    @property
    def plain(self) -> tuple[str, ...]:
        return self.forward + self.backward

    @property
    def empty(self) -> bool:
        return not self.forward and not self.leet


@lru_cache(maxsize=256)
def patterns(value: str) -> Patterns:
    """What is searched for a value (empty when its skeleton is too short to tell from a word)."""
    forward: list[str] = []
    leet: list[str] = []
    size = len(skeleton(value).replace(" ", ""))
    for table in LETTER_MAPS:
        mapped = value.translate(table)
        one = skeleton(mapped).replace(" ", "")
        two = skeleton(mapped, leet=True).replace(" ", "")
        if len(one) >= WHOLE and len(one) == size:
            forward.append(one)
        if len(two) >= WHOLE_LEET:
            leet += [two, two[::-1]]
    forward = list(dict.fromkeys(forward))
    return Patterns(
        forward=tuple(forward),
        backward=tuple(p[::-1] for p in forward),
        leet=tuple(dict.fromkeys(leet)),
        size=size,
        grams=_grams([*forward, *(p[::-1] for p in forward)]),
        mixed=_mixed_words(value, size),
    )


def _mixed_words(value: str, size: int) -> tuple[tuple[int, int], ...]:
    """Where the value's words that hold a digit sit in its skeleton (the whole skeleton if the two
    do not align)."""
    words: list[tuple[int, int]] = []
    at = 0
    for part in re.split(r"[^0-9A-Za-z]+", value):
        if part and not part.isalpha():
            words.append((at, at + len(part)))
        at += len(part)
    return tuple(words) if at == size and value.isascii() else ((0, size),)


def _shares(source: str, hay: str, run: int) -> bool:
    """Whether ``hay`` holds a run of ``run`` characters of ``source`` (block-anchored, exact)."""
    block = (run + 1) // 2
    for start in range(0, len(source) - block + 1, block):
        piece = source[start : start + block]
        at = hay.find(piece)
        while at >= 0:
            left = 0
            while left < start and left < at and source[start - left - 1] == hay[at - left - 1]:
                left += 1
            right, end_s, end_t = 0, start + block, at + block
            while (
                end_s + right < len(source)
                and end_t + right < len(hay)
                and source[end_s + right] == hay[end_t + right]
            ):
                right += 1
            if left + block + right >= run:
                return True
            at = hay.find(piece, at + 1)
    return False


def _near(value_patterns: Patterns, c: Canon) -> list[str]:
    """The value's patterns that share a run of :data:`PIECE` characters with a word of ``c``."""
    grams = c.grams
    if grams is not None and grams.isdisjoint(value_patterns.grams):
        return []
    if grams is None and not _any_gram(c.words, value_patterns.grams):
        return []
    return [p for p in value_patterns.plain if _shares(p, c.words, PIECE)]


def _longest(value_patterns: Patterns, c: Canon, near: list[str]) -> list[int]:
    """For each start in the value's skeleton, the end of the longest piece from it found in a word
    of ``c`` (in some letter map and direction); the start itself when none of PIECE is."""
    size = value_patterns.size
    forward = [p for p in value_patterns.forward if p in near]
    backward = [p for p in value_patterns.backward if p in near]

    def found(i: int, j: int) -> bool:
        return any(p[i:j] in c.words for p in forward) or any(
            p[size - j : size - i] in c.words for p in backward
        )

    ends: list[int] = []
    for i in range(size):
        # A piece found has every shorter prefix found: the longest is a binary search.
        lo, hi = i + PIECE - 1, size
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if found(i, mid):
                lo = mid
            else:
                hi = mid - 1
        ends.append(lo if lo >= i + PIECE else i)
    return ends


def _fragment(value_patterns: Patterns, ends: list[int]) -> bool:
    """A telling piece of at least half the value (and PIECE characters)."""
    run = max(PIECE, math.ceil(value_patterns.size / 2))
    return any(end - i >= run and value_patterns.telling(i, end) for i, end in enumerate(ends))


def _in_pieces(value_patterns: Patterns, ends: list[int]) -> bool:
    """Whether telling pieces of at least PIECE characters make up the whole value."""
    size = value_patterns.size
    reach = [False] * (size + 1)
    reach[size] = True
    for i in range(size - 1, -1, -1):
        reach[i] = any(reach[j] and value_patterns.telling(i, j) for j in range(i + PIECE, ends[i] + 1))
    return reach[0]


#: Answers of :func:`exposed` (they keep their texts alive: bounded by the texts' length).
_EXPOSED: SizedCache[tuple[Patterns, str], str | None] = SizedCache(entries=4096, budget=1 << 22)


def exposed(value_patterns: Patterns, text: str) -> str | None:
    """How the value shows in ``text``, if it does: ``canonical``, ``canonical fragment`` or
    ``canonical pieces`` (see the module docstring)."""
    return _EXPOSED.get_or_make((value_patterns, text), len(text), lambda: _exposed(value_patterns, text))


def _exposed(value_patterns: Patterns, text: str) -> str | None:
    if value_patterns.empty or len(text) < PIECE:
        return None
    c = canon(text)
    if any(p in c.joined for p in value_patterns.plain) or any(
        p in c.joined_leet for p in value_patterns.leet
    ):
        return "canonical"
    near = _near(value_patterns, c)
    if not near:
        return None
    ends = _longest(value_patterns, c, near)
    if _fragment(value_patterns, ends):
        return "canonical fragment"
    if value_patterns.size >= 2 * PIECE and _in_pieces(value_patterns, ends):
        return "canonical pieces"
    return None


def holds_piece(value_patterns: Patterns, text: str) -> bool:
    """Whether ``text`` holds, in one word of a canonical form, a piece of the value of at least
    half :data:`PIECE` characters (a part of a value spread over several strings)."""
    if len(text) < PIECE // 2:
        return False
    words = canon(text).words
    return any(_shares(p, words, PIECE // 2) for p in value_patterns.plain)
