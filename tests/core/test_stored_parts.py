"""The layout of a stored file in ConfigMaps (decision 0114): plain text when it fits, gzip otherwise."""

from __future__ import annotations

import base64
import gzip
import os

import pytest

from oasis_operator.core import stored_parts


def as_configmaps(parts: list[stored_parts.Part]) -> list[dict[str, object]]:
    return [{"data": p.data, "binaryData": p.binary_data} for p in parts]


def test_a_small_text_file_is_one_plain_key_named_for_the_file() -> None:
    text = '{"verdict": {"safety": "PASS"}, "note": "ünïcode"}\n'
    parts = stored_parts.layout("report.json", text.encode())
    assert parts == [stored_parts.Part("text", {"report.json": text}, {})]
    assert stored_parts.read(as_configmaps(parts)) == text.encode()


@pytest.mark.parametrize(
    ("why", "key", "data"),
    [
        ("larger than the plain limit", "report.json", b"x" * (stored_parts.PLAIN_LIMIT + 1)),
        ("not UTF-8", "report.json", b"\xff\xfe binary"),
        ("a name a ConfigMap key cannot carry", "evidence/one.jsonl", b"{}"),
    ],
)
def test_anything_else_is_gzipped(why: str, key: str, data: bytes) -> None:
    parts = stored_parts.layout(key, data)
    assert all(p.encoding == "gzip" and not p.data for p in parts), why
    assert stored_parts.read(as_configmaps(parts)) == data


def test_the_plain_limit_is_inclusive() -> None:
    parts = stored_parts.layout("report.junit.xml", b"y" * stored_parts.PLAIN_LIMIT)
    assert [p.encoding for p in parts] == ["text"]


def test_an_incompressible_oversize_file_is_split_into_parts_within_the_limit() -> None:
    data = os.urandom(2 * stored_parts.PART_LIMIT)
    parts = stored_parts.layout("evidence.bin", data)
    assert len(parts) == 3
    assert all(len(base64.b64decode(p.binary_data["data.gz"])) <= stored_parts.PART_LIMIT for p in parts)
    assert stored_parts.read(as_configmaps(parts)) == data


def test_the_older_layout_is_read_too() -> None:
    """Reports stored before decision 0114 are gzipped however small."""
    old = [{"binaryData": {"data.gz": base64.b64encode(gzip.compress(b"{}", mtime=0)).decode()}}]
    assert stored_parts.read(old) == b"{}"


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        ([{"data": {"a": "1", "b": "2"}}], "a plain part holds one key"),
        ([{"data": {}}], "part 1 of 1: no binaryData.data.gz"),
        ([{"binaryData": {"data.gz": base64.b64encode(b"not gzip").decode()}}], "do not decompress"),
    ],
)
def test_a_damaged_part_is_an_error_that_says_what_is_wrong(
    parts: list[dict[str, object]], expected: str
) -> None:
    with pytest.raises(stored_parts.UnreadablePart, match=expected):
        stored_parts.read(parts)
