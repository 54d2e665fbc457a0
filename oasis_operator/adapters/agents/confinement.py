"""Everything that confines one sandboxed local agent run, set up and torn down together.

Called by the subprocess agent adapter for each run of a command the operator accepted with
``--allow-subprocess-agents``. It bundles three mechanisms, each in its own module:

- the filesystem and signals: Landlock (:mod:`~oasis_operator.adapters.agents.sandbox`), hiding
  every credential path of the operator and of its user, and keeping signals, ptrace and abstract
  sockets inside the agent's own domain;
- the network: a private user and network namespace where only the endpoints the request names are
  reachable, through a relay (:mod:`~oasis_operator.adapters.agents.netjail`,
  :mod:`~oasis_operator.adapters.agents.relay`);
- the number of processes (:mod:`~oasis_operator.adapters.agents.pids`).

The parent calls :meth:`Confinement.prepare` before it starts the command, the child
:meth:`Confinement.enter` between fork and exec, the parent :meth:`Confinement.connect` once the
command runs and :meth:`Confinement.close` when it is over. Any part that cannot be had raises an
``OSError`` whose message says which and why; the adapter reports it and does not run the command.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from oasis_operator.adapters.agents import netjail, sandbox
from oasis_operator.adapters.agents.netjail import JailPlan
from oasis_operator.adapters.agents.pids import PidsCgroup
from oasis_operator.adapters.agents.reach import Endpoint
from oasis_operator.adapters.agents.relay import Relay
from oasis_operator.adapters.agents.sandbox import SandboxRules

__all__ = ["Confinement", "unavailable"]


@dataclass
class Confinement:
    rules: SandboxRules
    jail: JailPlan
    max_processes: int
    cgroup: PidsCgroup | None = None
    relay: Relay | None = field(default=None)

    @classmethod
    def prepare(
        cls, hidden: Sequence[Path], private: Path, endpoints: Sequence[Endpoint], max_processes: int
    ) -> Confinement:
        with contextlib.ExitStack() as undo:
            # uid 0 is exempt from RLIMIT_NPROC: root's agents get a pids cgroup instead.
            cgroup = PidsCgroup.create(max_processes) if os.geteuid() == 0 else None
            if cgroup is not None:
                undo.callback(cgroup.remove)
            jail = netjail.prepare(endpoints, private)
            undo.callback(jail.close)
            rules = sandbox.prepare(hidden, [private])
            undo.pop_all()
        return cls(rules, jail, max_processes, cgroup)

    def enter(self) -> None:
        """In the child, between fork and exec (the order matters: the cgroup is joined from the
        operator's namespace, the process limit is set once the namespace counts only the agent)."""
        if self.cgroup is not None:
            self.cgroup.join()
        netjail.enter(self.jail)
        if self.cgroup is None:
            resource.setrlimit(resource.RLIMIT_NPROC, (self.max_processes, self.max_processes))
        sandbox.enter(self.rules)

    def spawned(self) -> None:
        """In the parent, once the child has been forked: its ends are the child's alone."""
        self.jail.close_child_end()
        self.rules.close()

    def why_not_started(self) -> str | None:
        return self.jail.failure()

    async def connect(self) -> None:
        self.relay = await Relay.start(self.jail.receive())

    async def close(self) -> None:
        if self.relay is not None:
            await self.relay.close()
        self.jail.close()
        if self.cgroup is not None:
            await asyncio.to_thread(self.cgroup.remove)


def unavailable() -> str | None:
    """Why a local agent cannot be confined on this machine, as this process runs, or None when it
    can: Landlock too old or missing, no user namespace, no bound on its processes."""
    if why := sandbox.refusal(sandbox.abi_version()):
        return why
    if why := netjail.unavailable():
        return f"a private network namespace cannot be made ({why}): a local agent process could reach the operator's loopback back-ends"
    if os.geteuid() == 0:
        try:
            PidsCgroup.create(2).remove()
        except OSError as exc:
            return (
                f"the operator runs as root, for whom the kernel does not enforce RLIMIT_NPROC, and {exc}: "
                "a local agent process could fork without bound"
            )
    return None
