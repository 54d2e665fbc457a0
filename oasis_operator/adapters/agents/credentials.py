"""Reading an agent's credentials out of Kubernetes Secrets.

Called by whoever builds an HTTP agent adapter from an ``EvaluationRun`` (the run workflow, the CLI):
it turns a Secret, as the API returns it (a dict), into the bearer token or CA bundle text the
adapter takes. Errors name the Secret, the key and what was wrong, and never contain the value.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

__all__ = ["SecretKeyError", "secret_value"]


class SecretKeyError(ValueError):
    """The Secret does not hold a usable value under the key."""


def _secret_name(secret: Mapping[str, Any]) -> str:
    metadata = secret.get("metadata") or {}
    namespace = metadata.get("namespace")
    name = metadata.get("name", "<unnamed>")
    return f"{namespace}/{name}" if namespace else str(name)


def secret_value(secret: Mapping[str, Any], key: str = "token") -> str:
    """The text under ``key`` in the Secret, from ``stringData`` or base64 ``data``.

    Surrounding whitespace (a trailing newline from ``echo`` or a file) is removed; an empty value
    is an error, since an empty bearer token would silently send no credentials.
    """
    where = f"Secret {_secret_name(secret)} key {key!r}"
    string_data = secret.get("stringData") or {}
    data = secret.get("data") or {}
    if key in string_data:
        raw = string_data[key]
        if not isinstance(raw, str):
            raise SecretKeyError(f"{where}: found {type(raw).__name__} in stringData, expected text")
        text = raw
    elif key in data:
        encoded = data[key]
        if not isinstance(encoded, str):
            raise SecretKeyError(f"{where}: found {type(encoded).__name__} in data, expected base64 text")
        try:
            text = base64.b64decode(encoded, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise SecretKeyError(f"{where}: found a value that is not base64 of UTF-8 text") from None
    else:
        present = sorted({*data, *string_data})
        raise SecretKeyError(f"{where}: found no such key (keys present: {present}), expected the key")
    text = text.strip()
    if not text:
        raise SecretKeyError(f"{where}: found an empty value, expected a non-empty value")
    return text
