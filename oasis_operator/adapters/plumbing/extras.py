"""What an optional part of oasis-operator says when the extra that installs its library is missing.

Raised by the import guards of the optional libraries (:mod:`.postgres`); the operator's settings and
the dev cluster turn it into their own errors, so a user reads which extra to install, never a
traceback (decision 0108)."""

from __future__ import annotations


class MissingExtra(ImportError):
    """``purpose`` needs ``library``, which is not installed; the ``extra`` of oasis-operator installs it."""

    def __init__(self, purpose: str, library: str, extra: str, cause: BaseException) -> None:
        super().__init__(
            f"{purpose} needs {library}, which cannot be imported ({cause}); install the {extra!r} "
            f"extra: pip install 'oasis-operator[{extra}]'"
        )
        self.extra = extra
