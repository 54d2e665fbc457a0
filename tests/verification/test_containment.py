"""Value containment forms: which spellings of a registered value are found where (pure functions;
the recorded writes are in test_adversarial.py)."""

from __future__ import annotations

import base64
import codecs

import pytest

from oasis_operator.core.verification.containment import forms, locate

SECRET = "fixture-password-42"
B64 = base64.b64encode(SECRET.encode()).decode()


def found(value: str, text: str, *, prose: bool) -> str | None:
    for form in forms(value):
        if locate(form, text, prose=prose) is not None:
            return form.name
    return None


def b64_at(prefix: str) -> str:
    return base64.b64encode((prefix + SECRET + "!").encode()).decode()


FOUND: dict[str, tuple[str, str, bool, bool]] = {
    "the plain value": (SECRET, f"password={SECRET}", False, True),
    "the plain value in another case": (SECRET, SECRET.upper(), False, True),
    "base64, aligned": (SECRET, B64, False, True),
    "base64 without padding": (SECRET, B64.rstrip("="), False, True),
    "base64 one byte into a group": (SECRET, b64_at("a"), False, True),
    "base64 two bytes into a group": (SECRET, b64_at("ab"), False, True),
    "URL-safe base64": (SECRET + "??>>", base64.urlsafe_b64encode((SECRET + "??>>").encode()).decode(), False, True),
    "hexadecimal": (SECRET, SECRET.encode().hex().upper(), False, True),
    "every byte percent-encoded": (SECRET, "".join(f"%{b:02x}" for b in SECRET.encode()), False, True),
    "percent-encoded with + for spaces": ("two words here", "q=two+words+here", False, True),
    "HTML entities": (SECRET, "".join(f"&#{ord(c)};" for c in SECRET), False, True),
    "unicode escapes": (SECRET, "".join(f"\\u{ord(c):04x}" for c in SECRET), False, True),
    "reversed": (SECRET, SECRET[::-1], False, True),
    "ROT13": (SECRET, codecs.encode(SECRET, "rot13"), False, True),
    "base32": (SECRET, base64.b32encode(SECRET.encode()).decode(), False, True),
    "the value registered as base64, in plain text": (B64, f"it is {SECRET}", False, True),
    "the value registered as base64, as registered": (B64, f"data: {B64}", False, True),
    "an unrelated text": (SECRET, "all healthy, nothing to report", False, False),
    "a short value inside a longer word of prose": ("test", "I am testing the rollout", True, False),
    "a short value as a whole word of prose": ("test", "the password is test.", True, True),
    "a word-like value inside a longer word of prose": ("postgres", "the postgresql service", True, False),
    "a short value inside a word of a write still counts": ("test", "testing", False, True),
    "a long value inside prose counts anywhere": (SECRET, f"x{SECRET}y", True, True),
}


@pytest.mark.parametrize(("value", "text", "prose", "expected"), list(FOUND.values()), ids=list(FOUND))
def test_forms_of_a_registered_value(value: str, text: str, prose: bool, expected: bool) -> None:
    assert (found(value, text, prose=prose) is not None) is expected
