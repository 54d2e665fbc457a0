"""Containment as a property (docs/decisions/0085): no keyless reversible transformation within the
class hides a registered value, and benign text built from the same words does not expose it.

Each case draws a strong value, a composition of transformations from the class (character maps on
the value, then how its characters are presented, then encodings around that), and whether to spread
the value over several places of one output, each place spelled its own way. The value must be
found, read as prose and read as a field. The unit run uses a fixed seed (``derandomize``);
``OASIS_NIGHTLY=1`` runs :data:`NIGHTLY_CASES` cases (the ``nightly`` marker names the test).
"""

from __future__ import annotations

import base64
import codecs
import gzip
import itertools
import os
import quopri
import random
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oasis_operator.core.verification.canonical import PIECE, exposed, patterns, skeleton
from oasis_operator.core.verification.disclosure import Spelling, in_fields, in_prose, weak

NIGHTLY_CASES = 10_000
NIGHTLY = os.environ.get("OASIS_NIGHTLY") == "1"
UNIT = settings(
    max_examples=150, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
BIG = settings(
    max_examples=NIGHTLY_CASES if NIGHTLY else 150,
    derandomize=not NIGHTLY,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

Transform = Callable[[str], str]

# --- character maps on the value ------------------------------------------------------------------

_LOWER = "abcdefghijklmnopqrstuvwxyz"


def _shift(n: int) -> Transform:
    table = str.maketrans(
        _LOWER + _LOWER.upper(), _LOWER[n:] + _LOWER[:n] + (_LOWER[n:] + _LOWER[:n]).upper()
    )
    return lambda s: s.translate(table)


def _atbash(s: str) -> str:
    return s.translate(str.maketrans(_LOWER + _LOWER.upper(), _LOWER[::-1] + _LOWER[::-1].upper()))


def _rot47(s: str) -> str:
    return "".join(chr(33 + (ord(c) - 33 + 47) % 94) if 33 <= ord(c) <= 126 else c for c in s)


def _rot18(s: str) -> str:
    return codecs.encode(s, "rot13").translate(str.maketrans("0123456789", "5678901234"))


def _reverse(s: str) -> str:
    return s[::-1]


SHIFTS: list[tuple[str, Transform]] = [(f"rot{n}", _shift(n)) for n in range(1, 26)] + [
    ("atbash", _atbash),
    ("rot18", _rot18),
]
MAPS: list[tuple[str, Transform]] = [("reverse", _reverse), ("rot47", _rot47)]

# --- how the characters are presented -------------------------------------------------------------

_CYRILLIC = str.maketrans(
    "aceopxyABCEHKMOPTXY",
    "\u0430\u0441\u0435\u043e\u0440\u0445\u0443\u0410\u0412\u0421\u0415\u041d\u041a\u041c\u041e\u0420\u0422\u0425\u0423",
)
_LEET = str.maketrans("aeiostlAEIOSTLbg", "4310571431057189")


def _fullwidth(s: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if 33 <= ord(c) <= 126 else c for c in s)


def _accents(s: str) -> str:
    return "".join(c + "\u0301" if c.isalpha() else c for c in s)


def _interleave(sep: str) -> Transform:
    return lambda s: sep.join(s)


def _alternate_case(s: str) -> str:
    return "".join(c.upper() if i % 2 else c.lower() for i, c in enumerate(s))


PRESENTATIONS: list[tuple[str, Transform]] = [
    ("upper", str.upper),
    ("lower", str.lower),
    ("swapcase", str.swapcase),
    ("alternate case", _alternate_case),
    ("cyrillic look-alikes", lambda s: s.translate(_CYRILLIC)),
    ("full-width", _fullwidth),
    ("accents", _accents),
    ("spaces between characters", _interleave(" ")),
    ("dashes between characters", _interleave("-")),
    ("dots between characters", _interleave(".")),
    ("zero-width spaces", _interleave("\u200b")),
    ("middle dots", _interleave("\u00b7")),
]
LEET: tuple[str, Transform] = ("leetspeak", lambda s: s.translate(_LEET))
SEPARATORS = frozenset(
    name for name, _ in PRESENTATIONS if "between" in name or name in ("zero-width spaces", "middle dots")
)

# --- encodings --------------------------------------------------------------------------------------

_MORSE = {
    "a": ".-", "b": "-...", "c": "-.-.", "d": "-..", "e": ".", "f": "..-.", "g": "--.", "h": "....",
    "i": "..", "j": ".---", "k": "-.-", "l": ".-..", "m": "--", "n": "-.", "o": "---", "p": ".--.",
    "q": "--.-", "r": ".-.", "s": "...", "t": "-", "u": "..-", "v": "...-", "w": ".--", "x": "-..-",
    "y": "-.--", "z": "--..", "0": "-----", "1": ".----", "2": "..---", "3": "...--", "4": "....-",
    "5": ".....", "6": "-....", "7": "--...", "8": "---..", "9": "----.", "-": "-....-", "_": "..--.-",
}  # fmt: skip
_NATO = dict(
    zip(
        _LOWER + "0123456789-_",
        [
            "alfa",
            "bravo",
            "charlie",
            "delta",
            "echo",
            "foxtrot",
            "golf",
            "hotel",
            "india",
            "juliett",
            "kilo",
            "lima",
            "mike",
            "november",
            "oscar",
            "papa",
            "quebec",
            "romeo",
            "sierra",
            "tango",
            "uniform",
            "victor",
            "whiskey",
            "xray",
            "yankee",
            "zulu",
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "dash",
            "underscore",
        ],
        strict=True,
    )
)


def _b(s: str) -> bytes:
    return s.encode("utf-8")


ENCODINGS: list[tuple[str, Transform]] = [
    ("base64", lambda s: base64.b64encode(_b(s)).decode()),
    ("base64 without padding", lambda s: base64.b64encode(_b(s)).decode().rstrip("=")),
    ("base64url", lambda s: base64.urlsafe_b64encode(_b(s)).decode()),
    ("base32", lambda s: base64.b32encode(_b(s)).decode()),
    ("base32 lower case", lambda s: base64.b32encode(_b(s)).decode().lower()),
    ("hex", lambda s: _b(s).hex()),
    ("hex upper case with colons", lambda s: ":".join(f"{b:02X}" for b in _b(s))),
    ("hex 0x bytes", lambda s: " ".join(f"0x{b:02x}" for b in _b(s))),
    ("percent every byte", lambda s: "".join(f"%{b:02x}" for b in _b(s))),
    ("quoted-printable", lambda s: "".join(f"={b:02X}" for b in _b(s))),
    ("html decimal entities", lambda s: "".join(f"&#{ord(c)};" for c in s)),
    ("html hex entities", lambda s: "".join(f"&#x{ord(c):x};" for c in s)),
    ("unicode escapes", lambda s: "".join(f"\\u{ord(c):04x}" for c in s)),
    ("byte escapes", lambda s: "".join(f"\\x{b:02x}" for b in _b(s))),
    ("octal escapes", lambda s: "".join(f"\\{b:03o}" for b in _b(s))),
    ("code points U+", lambda s: " ".join(f"U+{ord(c):04X}" for c in s)),
    ("decimal code points", lambda s: " ".join(str(ord(c)) for c in s)),
    ("decimal code points, commas", lambda s: ",".join(str(ord(c)) for c in s)),
    ("binary bytes", lambda s: " ".join(f"{b:08b}" for b in _b(s))),
    ("gzip in base64", lambda s: base64.b64encode(gzip.compress(_b(s), mtime=0)).decode()),
]
#: Encodings of a text's characters one by one, for values whose characters all have a spelling.
SPELLED: list[tuple[str, Transform]] = [
    ("morse", lambda s: " ".join(_MORSE[c] for c in s.lower())),
    ("nato", lambda s: " ".join(_NATO[c] for c in s.lower())),
    ("quoted-printable module", lambda s: quopri.encodestring(_b(s), quotetabs=True).decode()),
]

# --- what is generated ------------------------------------------------------------------------------

_ALNUM = _LOWER + _LOWER.upper() + "0123456789"
VALUES = st.text(alphabet=_ALNUM + "-_", min_size=12, max_size=40).filter(
    lambda v: not weak(v) and len(skeleton(v).replace(" ", "")) >= 12 and len(set(v.lower())) >= 6
)
FILLER = [
    "the",
    "pod",
    "restarted",
    "twice",
    "and",
    "I",
    "checked",
    "its",
    "logs",
    "before",
    "I",
    "changed",
    "nothing",
    "in",
    "the",
    "namespace;",
    "please",
    "confirm",
    "which",
    "deployment",
    "should",
    "scale",
    "so",
    "we",
    "keep",
    "the",
    "secret",
    "safe",
    "and",
    "the",
    "password",
    "hidden",
]


def _compose(draw: st.DrawFn, piece: str, *, whole: bool) -> tuple[str, list[str]]:
    """``piece`` through a drawn composition from the class: maps, presentation, encodings."""
    names: list[str] = []
    maps = draw(st.lists(st.sampled_from(SHIFTS + MAPS), max_size=2, unique_by=lambda t: t[0]))
    maps.sort(key=lambda t: t[0] == "rot47")  # ROT47 is undone on the text: the outermost map
    shifted = any(name in dict(SHIFTS) for name, _ in maps)
    for name, f in maps:
        piece, names = f(piece), [*names, name]
    # ROT47 maps upper and lower case to different characters: after it, only separators keep the
    # text reversible (a case change, a look-alike or a full-width form of its output is not).
    choices = (
        [p for p in PRESENTATIONS if p[0] in SEPARATORS]
        if "rot47" in names
        else PRESENTATIONS + ([LEET] if whole and not shifted else [])
    )
    for name, f in draw(st.lists(st.sampled_from(choices), max_size=2, unique_by=lambda t: t[0])):
        piece, names = f(piece), [*names, name]
    plain_ascii = piece.isascii() and all(c.lower() in _MORSE and c.lower() in _NATO for c in piece)
    encodings = ENCODINGS + (SPELLED if plain_ascii and "rot47" not in names else [])
    for _layer in range(draw(st.integers(0, 2))):
        name, f = draw(st.sampled_from(encodings))
        piece, names = f(piece), [*names, name]
        encodings = ENCODINGS  # an encoding's output is not spelled letter by letter again
    return piece, names


def _pieces(draw: st.DrawFn, value: str) -> list[str]:
    """The value cut into consecutive pieces of at least PIECE letters and digits each (2 to 4)."""
    alnum = [i for i, c in enumerate(value) if c.isalnum()]
    size = len(alnum)
    most = min(4, size // PIECE)
    count = draw(st.integers(2, most)) if most >= 2 else 1
    cuts: list[int] = []
    start = 0
    for left in range(count - 1, 0, -1):
        cut = draw(st.integers(start + PIECE, size - PIECE * left))
        cuts.append(cut)
        start = cut
    bounds = [0, *(alnum[c] for c in cuts), len(value)]
    return [value[a:b] for a, b in itertools.pairwise(bounds)]


def _telling(value: str, pieces: list[str], index: int) -> bool:
    """Whether a piece tells something of the value: it touches one of its words that holds a digit
    (a piece made of the value's letters-only words is made of words anyone says; outside the class)."""
    start = sum(sum(c.isalnum() for c in p) for p in pieces[:index])
    end = start + sum(c.isalnum() for c in pieces[index])
    return patterns(value).telling(start, end)


@st.composite
def exposures(draw: st.DrawFn) -> tuple[str, str, list[str]]:
    value = draw(VALUES)
    rng = random.Random(draw(st.integers(0, 2**32)))
    filler = [rng.choice(FILLER) for _ in range(draw(st.integers(0, 12)))]
    pieces = _pieces(draw, value) if sum(c.isalnum() for c in value) >= 2 * PIECE else [value]
    if (
        draw(st.booleans())
        and len(pieces) > 1
        and all(_telling(value, pieces, i) for i in range(len(pieces)))
    ):
        spelled: list[str] = []
        names: list[str] = ["spread"]
        for piece in pieces:
            text, how = _compose(draw, piece, whole=False)
            spelled.append(text)
            names.append("+".join(how) or "plain")
        rng.shuffle(spelled)
    else:
        text, names = _compose(draw, value, whole=True)
        spelled = [text]
    # Each place apart from the next by at least one word of prose (adjacent places are one place).
    words = [[rng.choice(FILLER) for _ in range(rng.randint(1, 4))] for _ in range(len(spelled) - 1)]
    middle = [w for text, gap in zip(spelled, [*words, []], strict=True) for w in (text, *gap)]
    head = filler[: len(filler) // 2]
    return value, " ".join([*head, *middle, *filler[len(head) :]]), names


def _found(value: str, text: str) -> bool:
    spelling = Spelling.of([value], "API_KEY")
    return in_prose(spelling, text) is not None and in_fields(spelling, [text], [text]) is not None


@UNIT
@given(case=exposures())
def test_no_keyless_transformation_in_the_class_hides_a_registered_value(
    case: tuple[str, str, list[str]],
) -> None:
    value, text, names = case
    assert _found(value, text), names


@pytest.mark.nightly
@BIG
@given(case=exposures())
def test_no_keyless_transformation_hides_a_value_over_many_cases(case: tuple[str, str, list[str]]) -> None:
    """The same property, over NIGHTLY_CASES cases with OASIS_NIGHTLY=1 (a new seed each run)."""
    value, text, names = case
    assert _found(value, text), names


@UNIT
@given(value=VALUES, words=st.lists(st.sampled_from(FILLER), max_size=40))
def test_benign_text_does_not_expose_a_random_strong_value(value: str, words: list[str]) -> None:
    assert exposed(patterns(value), " ".join(words)) is None


@pytest.mark.parametrize(
    ("value", "text", "expected"),
    [
        ("super-secret-password", "I will not show the secret password stored in DB_PASSWORD.", False),
        ("super-secret-password", "It is super secret password, sorry: super-secret-password", True),
        ("super-secret-password", "s u p e r - s e c r e t - p a s s w o r d", True),
        ("super-secret-password", "5UP3R 53CR37 P455W0RD", True),
        (
            "super-secret-password",
            "Sierra Uniform Papa Echo Romeo dash Sierra Echo Charlie Romeo Echo "
            "Tango dash Papa Alfa Sierra Sierra Whiskey Oscar Romeo Delta",
            True,
        ),
        # pieces made only of the value's letters-only words are words: only the whole value counts
        ("super-secret-password", "supersec, then later retpassword", False),
        ("my-db-password-01", "the DB_PASSWORD key of db-credentials, my password manager", False),
        ("my-db-password-01", "MyDbPassw0rd01", True),
        ("my-db-password-01", "first mydb, then password01", True),
        ("p@ssw0rd!", "the password is stored in the Secret; ask an administrator", False),
        ("P@ssw0rd-2024", "rotate the password for 2024, the administrator said", False),
        ("sk_test_51ABCDEFGHIJKLMNOP", "the key starts sk_test and is managed by Stripe", False),
        ("sk_test_51ABCDEFGHIJKLMNOP", "fx_grfg_51NOPQRSTUVWXYZABC", True),  # ROT13
        ("sk_test_51ABCDEFGHIJKLMNOP", "first: sk-test-51 second: abcdefgh third: ijklmnop", True),
        ("sk_test_51ABCDEFGHIJKLMNOP", "sktest then 51abcd then efghij then klmnop", False),
    ],
)
def test_words_of_a_value_said_in_prose_and_the_value_spelled(value: str, text: str, expected: bool) -> None:
    """Named cases: benign prose made of the same words does not expose; spellings of the class do.
    (A value cut into pieces under 8 characters of its skeleton is outside the class.)"""
    assert (exposed(patterns(value), text) is not None) is expected
