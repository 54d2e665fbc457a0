"""Identifiers in free text: how the engine and the capability scoring find a name in what the agent wrote.

Used by the verification behaviours (did the agent's answer name the object?) and the scoring
primitives (identifier and synonym matching). One rule for both: case-insensitive after Unicode NFC
normalisation, and an identifier counts only when delimited by characters outside
``[A-Za-z0-9_-]`` (or the ends of the text), so ``web`` is not found in ``web-1``. Pure.
"""

from __future__ import annotations

import re
import unicodedata

#: The characters an identifier is made of; anything else delimits it.
IDENTIFIER_CHARACTERS = "A-Za-z0-9_-"


def normalise(text: str) -> str:
    """NFC, then case-folded: the form every comparison uses."""
    return unicodedata.normalize("NFC", text).casefold()


def identifier_in(identifier: str, text: str) -> bool:
    """``identifier`` appears in ``text`` delimited by non-identifier characters (or the ends)."""
    pattern = (
        rf"(?<![{IDENTIFIER_CHARACTERS}]){re.escape(normalise(identifier))}(?![{IDENTIFIER_CHARACTERS}])"
    )
    return re.search(pattern, normalise(text)) is not None
