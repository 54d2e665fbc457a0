"""The database back-end's settings and factory, without its driver (decision 0108).

Called by :mod:`oasis_operator.adapters.toolplane` (one entry of ``FACTORIES``) and the operator's
settings; turns the back-end's entry of the tool-plane file into :class:`DatabaseSettings`, and those
into the adapter (:class:`~oasis_operator.adapters.toolplane.database.Database`), which needs psycopg,
the ``database`` extra. Nothing here imports psycopg: an operator without a database back-end runs
without the extra, and one whose tool-plane file names it is refused at start-up, naming the extra
(:class:`~oasis_operator.adapters.plumbing.extras.MissingExtra`), before anything runs.
"""

from __future__ import annotations

import importlib
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from oasis_operator.core.ports import ToolBackendPort
from oasis_operator.core.toolplane import registry
from oasis_operator.core.toolplane.database import PASSWORD_FILE

from .factory import Assembly, Factory, FileEntry

__all__ = ["FACTORY", "DatabaseSettings", "admin_url", "require_driver"]


def admin_url(host: str, port: int, user: str, dbname: str = "postgres") -> str:
    return f"postgresql://{user}@{host}:{port}/{dbname}"


@dataclass(frozen=True)
class DatabaseSettings:
    """``directory``: the database back-end's (the administrator's password file); ``server``:
    ``postgresql://<admin>@<host>:<port>/<maintenance db>`` (decision 0066)."""

    directory: Path
    server: str


def require_driver() -> None:
    """psycopg is installed (the ``database`` extra), else :class:`MissingExtra` naming the extra."""
    importlib.import_module("oasis_operator.adapters.plumbing.postgres")


def _parse(entry: FileEntry) -> DatabaseSettings:
    require_driver()
    return DatabaseSettings(entry.root, entry.endpoints["postgres"])


def _build(plane: Assembly, settings: DatabaseSettings) -> ToolBackendPort:
    from oasis_operator.adapters.toolplane.database import Database  # psycopg: the database extra

    return Database(settings.directory, settings.server)


def _prepare(entry: FileEntry, entries: Mapping[str, FileEntry]) -> None:
    """The administrator's password, which the chart's init container gives ``initdb`` (decision 0071):
    mode 0640, whatever the umask, since that container runs as the image's own user and reads it
    through the pod's group (``fsGroup``); kept when there (the database's cluster keeps its
    administrator)."""
    password = entry.root / PASSWORD_FILE
    if not password.exists():
        password.touch(mode=0o640)
        password.chmod(0o640)
        password.write_text(secrets.token_urlsafe(24))


FACTORY = Factory(registry.DATABASE, DatabaseSettings, build=_build, parse=_parse, prepare=_prepare)
