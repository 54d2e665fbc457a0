"""Errors of the embedded control plane that a person can act on (printed without a traceback)."""

from __future__ import annotations


class SetupError(Exception):
    """The control plane could not be built or started; the message says why and what to do."""
