"""How a tool plane is put together: the Kubernetes cluster it works through, and one :class:`Factory`
per back-end that turns the back-end's typed settings into its adapter.

Each back-end's module (``adapters/toolplane/<name>.py``) defines its settings (a frozen dataclass) and
its ``FACTORY``; :func:`oasis_operator.adapters.toolplane.tool_plane` builds the adapters of one plane
from them, and the operator's settings (``handlers/settings.py``) make each back-end's settings from
its entry of the tool-plane file, once the entry has passed the checks its registry row asks for
(:class:`oasis_operator.core.toolplane.registry.Entry`). Nothing here is kept between calls: the
cluster comes with every call, so one tool plane can be built per target cluster.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import httpx2

from oasis_operator.core.errors import ToolPlaneError
from oasis_operator.core.ports import ToolBackendPort

S = TypeVar("S")
T = TypeVar("T")


@dataclass(frozen=True)
class Cluster:
    """The Kubernetes cluster a tool plane works through: the operator's client of its API server
    (``http``, its base URL set) and that server's URL as agents' kubeconfigs name it (``server``).
    What else differs per cluster (where its node simulator reads log files, how its Flux reaches the
    git server) is in the back-ends' settings, which come with the same call."""

    http: httpx2.AsyncClient
    server: str


@dataclass(frozen=True)
class FileEntry:
    """A back-end's entry of the tool-plane file, checked against its registry row: its directory (None
    when the row names none), its endpoints (name -> URL) and every field as written."""

    name: str
    directory: Path | None
    endpoints: Mapping[str, str]
    fields: Mapping[str, Any]

    @property
    def root(self) -> Path:
        """The entry's directory (its row names one)."""
        if self.directory is None:  # pragma: no cover - the row's check makes one
            raise ToolPlaneError(f"the {self.name} back-end's entry names no directory")
        return self.directory


class EntryError(ValueError):
    """A field of a back-end's entry is not what it must be: ``field`` (its path below the entry),
    what was ``expected`` and what was found. The operator's settings name the file around it."""

    def __init__(self, field: str, expected: str, found: Any) -> None:
        super().__init__(f"field {field}: expected {expected} (found {found!r})")
        self.field = field
        self.expected = expected
        self.found = found


class Assembly:
    """What the back-ends of one tool plane share while it is built: the cluster, every back-end's
    settings, the clients opened for the back-ends' own (non-Kubernetes) endpoints, which close with
    the plane, and parts two adapters share (the metrics and alerting back-ends' vmauth)."""

    def __init__(self, cluster: Cluster, settings: Mapping[str, object]) -> None:
        self.cluster = cluster
        self.settings = settings
        self._clients: dict[str, httpx2.AsyncClient] = {}
        self._shared: dict[str, object] = {}

    def client(self, purpose: str) -> httpx2.AsyncClient:
        """The plane's own client for ``purpose`` (made on first use, closed with the plane)."""
        if purpose not in self._clients:
            self._clients[purpose] = httpx2.AsyncClient(timeout=httpx2.Timeout(10.0))
        return self._clients[purpose]

    def shared(self, key: str, kind: type[T], make: Callable[[], T]) -> T:
        """The one ``key`` of this plane, made by ``make`` on first use."""
        if key not in self._shared:
            self._shared[key] = make()
        value = self._shared[key]
        if not isinstance(value, kind):  # pragma: no cover - two factories disagree on a key
            raise ToolPlaneError(f"the tool plane's shared {key} is not a {kind.__name__}")
        return value

    def settings_of(self, name: str, kind: type[T]) -> T:
        """Back-end ``name``'s settings (one this back-end builds on)."""
        value = self.settings.get(name)
        if not isinstance(value, kind):
            raise ToolPlaneError(f"the {name} back-end's settings are missing (found {value!r})")
        return value

    @property
    def owned(self) -> tuple[httpx2.AsyncClient, ...]:
        return tuple(self._clients.values())


@dataclass(frozen=True)
class Factory(Generic[S]):
    """How one back-end's adapter is made. ``settings``: the type of its settings (``type(None)`` for
    a back-end that needs none); ``build``: the adapter, given the plane being built and the settings;
    ``parse``: the settings from its checked entry of the tool-plane file (a configured back-end);
    ``discover``: the settings when the cluster serves the back-end, else None (a discovered one);
    ``prepare``: what its processes read before they start, made from its entry and the whole file's
    (the chart's init container, ``oasis operator prepare-toolplane``)."""

    name: str
    settings: type[S]
    build: Callable[[Assembly, S], ToolBackendPort]
    parse: Callable[[FileEntry], S] | None = None
    discover: Callable[[Cluster], Awaitable[S | None]] | None = None
    prepare: Callable[[FileEntry, Mapping[str, FileEntry]], None] | None = None

    def make(self, assembly: Assembly, settings: object) -> ToolBackendPort:
        """The adapter, after checking that ``settings`` are this back-end's."""
        if not isinstance(settings, self.settings):
            raise ToolPlaneError(
                f"the {self.name} back-end takes {self.settings.__name__} settings, not "
                f"{type(settings).__name__}"
            )
        return self.build(assembly, settings)


NONE = type(None)
