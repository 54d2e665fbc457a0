"""Reading an agent's bearer token (or CA bundle) out of a Kubernetes Secret."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from oasis_operator.adapters.agents.credentials import SecretKeyError, secret_value

META = {"name": "agent-auth", "namespace": "ops"}


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize(
    ("sentence", "secret", "key", "value"),
    [
        ("base64 data, trailing newline removed", {"data": {"token": b64("tok-1\n")}}, "token", "tok-1"),
        (
            "stringData wins over data",
            {"data": {"token": b64("old")}, "stringData": {"token": "new"}},
            "token",
            "new",
        ),
        (
            "another key",
            {"data": {"ca.crt": b64("-----BEGIN CERTIFICATE-----")}},
            "ca.crt",
            "-----BEGIN CERTIFICATE-----",
        ),
    ],
)
def test_a_value_is_read(sentence: str, secret: dict[str, Any], key: str, value: str) -> None:
    assert secret_value({"metadata": META, **secret}, key) == value


@pytest.mark.parametrize(
    ("sentence", "secret", "message"),
    [
        ("the key is absent", {"data": {"other": b64("x")}}, "no such key (keys present: ['other'])"),
        ("the value is not base64", {"data": {"token": "%%%"}}, "not base64"),
        ("the value is blank", {"data": {"token": b64("  \n")}}, "empty value"),
        ("the value is not text", {"stringData": {"token": 3}}, "found int"),
    ],
)
def test_a_bad_secret_gets_a_precise_error(sentence: str, secret: dict[str, Any], message: str) -> None:
    with pytest.raises(SecretKeyError) as caught:
        secret_value({"metadata": META, **secret}, "token")
    assert "Secret ops/agent-auth key 'token'" in str(caught.value)
    assert message in str(caught.value)


def test_the_error_never_contains_the_value() -> None:
    with pytest.raises(SecretKeyError) as caught:
        secret_value({"metadata": META, "data": {"token": "c2VjcmV0-not-base64"}}, "token")
    assert "c2VjcmV0" not in str(caught.value)
