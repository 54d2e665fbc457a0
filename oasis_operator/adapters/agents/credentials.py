"""Reading an agent's credentials out of Kubernetes Secrets.

Called by whoever builds an HTTP agent adapter from an ``EvaluationRun`` (the run workflow, the CLI):
it turns a Secret, as the API returns it (a dict), into the bearer token or CA bundle text the
adapter takes. Errors name the Secret, the key and what was wrong, and never contain the value.

Before that, the operator asks whether the run may have that Secret at all
(:func:`credentials_refusal`): only if the user who chose where it goes may read it (decision 0099,
:mod:`oasis_operator.core.model.credentials_policy`).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
from collections.abc import Mapping
from typing import Any

from oasis_operator.core.model.credentials_policy import (
    CREDENTIALS_USER,
    POLICY_NAME,
    access_review,
    policy_manifests,
    run_predates_policy,
)

__all__ = ["SecretKeyError", "credentials_refusal", "ensure_credentials_policy", "secret_value"]

FIELD_MANAGER = "oasis-operator"


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


# -- whose Secret a run may name (decision 0099) ---------------------------------------------------------


async def ensure_credentials_policy(client: Any) -> dt.datetime:
    """Install the admission policy that pins ``credentials-user`` to the requesting user (applying it
    again is harmless); returns when the policy was first created."""
    from lightkube import codecs

    for manifest in policy_manifests():
        await client.apply(codecs.from_dict(manifest), field_manager=FIELD_MANAGER, force=True)
    from lightkube.resources.admissionregistration_v1 import ValidatingAdmissionPolicy

    policy = await client.get(ValidatingAdmissionPolicy, POLICY_NAME)
    created = policy.metadata.creationTimestamp if policy.metadata else None
    return created if isinstance(created, dt.datetime) else dt.datetime.now(dt.UTC)


async def credentials_refusal(
    client: Any,
    run: Mapping[str, Any],
    secret: str,
    policy_created: dt.datetime | None,
) -> str | None:
    """Why the run may not have Secret ``secret`` of its namespace sent to its agent, or None: the
    user the run names in ``credentials-user`` (pinned by the admission policy) must be allowed to
    ``get`` it, asked of the API server as that user."""
    from lightkube.resources.authorization_v1 import SubjectAccessReview

    meta = run.get("metadata") or {}
    namespace = str(meta.get("namespace") or "")
    where = f"agent.credentialsRef: Secret {namespace}/{secret}"
    if policy_created is None:
        return f"{where}: refused: the operator could not install its admission policy {POLICY_NAME}"
    created = _timestamp(meta.get("creationTimestamp"))
    if created is None or run_predates_policy(created, policy_created):
        return f"{where}: refused: the run predates the admission policy {POLICY_NAME}; create it again"
    user = str((meta.get("annotations") or {}).get(CREDENTIALS_USER) or "")
    if not user:
        return f"{where}: refused: the run has no {CREDENTIALS_USER} annotation"
    review = await client.create(SubjectAccessReview.from_dict(access_review(user, namespace, secret)))
    if not (review.status is not None and review.status.allowed):
        return (
            f"{where}: refused: {user} (who set the run's agent) may not get that Secret; the operator "
            "sends only what that user may read (decision 0099)"
        )
    return None


def _timestamp(value: Any) -> dt.datetime | None:
    if isinstance(value, dt.datetime):
        return value
    try:
        return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
