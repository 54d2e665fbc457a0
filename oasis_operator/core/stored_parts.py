"""How a file the operator stores for a run (a report, a report format, evidence) is laid out in
ConfigMaps, and how it is read back (decision 0114).

The rule: a file that is UTF-8 text, whose name is a valid ConfigMap key and whose size is at most
:data:`PLAIN_LIMIT` bytes is stored as it is, in one ConfigMap, under ``data.<file name>``, so
``kubectl get configmap NAME -o jsonpath='{.data.report\\.json}'`` prints it. Anything else (larger,
binary, or a name a ConfigMap key cannot carry) is gzipped and split into parts of at most
:data:`PART_LIMIT` bytes under ``binaryData.data.gz``, which ``oasis report`` and ``oasis evidence
export`` read. Both readers accept both layouts. Pure: values in, values out.
"""

from __future__ import annotations

import base64
import gzip
import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

PLAIN_LIMIT = 900 * 1024
"""Bytes of text stored as a plain ``data`` key (the API refuses a ConfigMap whose values exceed
1 MiB; the rest is room for the metadata)."""
PART_LIMIT = 900 * 1024
"""Bytes of gzip data per ConfigMap in the compressed fallback."""
GZIP_KEY = "data.gz"
ENCODING_ANNOTATION = "oasis.dev/encoding"
TEXT, GZIP = "text", "gzip"

_CONFIGMAP_KEY = re.compile(r"^[-._a-zA-Z0-9]{1,253}$")


class UnreadablePart(ValueError):
    """A stored part that is neither layout, or whose compressed data is damaged."""


@dataclass(frozen=True)
class Part:
    """One ConfigMap's payload: ``data`` (plain text) or ``binary_data`` (base64 of gzip bytes)."""

    encoding: str
    data: dict[str, str]
    binary_data: dict[str, str]


def plain_text(key: str, data: bytes) -> str | None:
    """``data`` as the text stored under ``data.<key>``; None when the rule sends it to the fallback."""
    if len(data) > PLAIN_LIMIT or not _CONFIGMAP_KEY.match(key) or key == GZIP_KEY:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def layout(key: str, data: bytes) -> list[Part]:
    """The parts that store ``data`` under the file name ``key``, in order."""
    text = plain_text(key, data)
    if text is not None:
        return [Part(TEXT, {key: text}, {})]
    packed = gzip.compress(data, mtime=0)
    chunks = [packed[i : i + PART_LIMIT] for i in range(0, len(packed), PART_LIMIT)] or [b""]
    return [Part(GZIP, {}, {GZIP_KEY: base64.b64encode(c).decode()}) for c in chunks]


def read(configmaps: Sequence[Mapping[str, Any]]) -> bytes:
    """The file stored in ``configmaps`` (their JSON form, in order), in either layout."""
    if not configmaps:
        return b""
    texts = [cm.get("data") or {} for cm in configmaps]
    if len(configmaps) == 1 and texts[0] and not (configmaps[0].get("binaryData") or {}):
        if len(texts[0]) != 1:
            raise UnreadablePart(f"a plain part holds one key, found {sorted(texts[0])}")
        return str(next(iter(texts[0].values()))).encode("utf-8")
    packed = b""
    for i, cm in enumerate(configmaps):
        value = (cm.get("binaryData") or {}).get(GZIP_KEY)
        if not isinstance(value, str):
            raise UnreadablePart(f"part {i + 1} of {len(configmaps)}: no binaryData.{GZIP_KEY}")
        packed += base64.b64decode(value)
    try:
        return gzip.decompress(packed) if packed else b""
    except (OSError, EOFError, zlib.error) as exc:
        raise UnreadablePart(f"the compressed parts do not decompress: {exc}") from None
