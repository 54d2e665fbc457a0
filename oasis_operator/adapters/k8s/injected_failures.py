"""What happens to a workload's pods while the agent works: injected failures, and rollouts that go on.

Called by the scenario workflow around the agent's run (armed before it starts, settled before the
"after" snapshot, stopped after it). It watches the pods of every workload whose plan declares an
injected failure (``WorkloadState.on_restart``) and gives each pod that starts after the handover the
failing status a kubelet would report (e.g. ImagePullBackOff) with its Events. The node simulator
never starts these pods (its stages skip the annotation the plan puts on their template), so there is
no moment in which a restarted pod looks healthy, whatever the timing.

The failure of a pod is stamped with a whole second and written no earlier than that second: Event
times have whole-second precision, and this way "after the failure" means the same thing to the
verification engine (which reads the Event's time) and to the agent (which can only see the failure
once it is written).

A rollout in progress (``on_restart == "running"``) is driven the same way: each of its pods that is
starting (or starts) shows ContainerCreating and runs a few seconds later, so the rollout proceeds at
a plausible pace while the agent watches, pauses or undoes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import Iterable
from typing import Any, Protocol, cast

from lightkube import ApiError, AsyncClient
from lightkube.resources.apps_v1 import Deployment, ReplicaSet
from lightkube.resources.core_v1 import Pod

from oasis_operator.adapters.plumbing.polling import wait_until
from oasis_operator.core.environment import pod_status, provider_pods
from oasis_operator.core.environment.manifests import WorkloadState
from oasis_operator.core.environment.symptoms import observed, replicaset_settled
from oasis_operator.core.errors import InjectedFailureNotSettled

log = logging.getLogger(__name__)


class SimulatedKubelet(Protocol):
    """What the injector writes through: the provisioner's stand-in for a kubelet (kubelet.Kubelet),
    which knows where a pod runs and writes its status and Events. Stated here, so that this module
    does not import the environment that creates it."""

    @property
    def client(self) -> AsyncClient: ...

    def now(self) -> dt.datetime: ...

    async def where(self, pod: dict[str, Any]) -> dict[str, Any]: ...

    async def write_pod_status(self, pod: dict[str, Any], status: dict[str, Any]) -> None: ...

    async def create_event(self, manifest: dict[str, Any]) -> None: ...


def _next_whole_second(t: dt.datetime) -> dt.datetime:
    return t.replace(microsecond=0) + dt.timedelta(seconds=1)


class FailureInjector:
    """Injects the declared failures into the pods of ``workloads`` that start after :meth:`start`."""

    def __init__(self, env: SimulatedKubelet, workloads: Iterable[WorkloadState], owner: str) -> None:
        self.env = env
        self.owner = owner
        self.workloads = {(w.namespace, w.name): w for w in workloads if w.on_restart}
        self.handled: dict[str, str] = {}  # pod uid -> the state written (a failure, or running)
        self._inflight: dict[str, asyncio.Task[None]] = {}  # failures being written
        self._starting: dict[str, asyncio.Task[None]] = {}  # rollout pods waiting to run
        self._watchers: list[asyncio.Task[None]] = []
        self._errors: list[str] = []

    @property
    def active(self) -> bool:
        return bool(self.workloads)

    async def start(self) -> None:
        """Arm: from now on every pod of the workloads that has not started yet gets its failure."""
        for ns in sorted({ns for ns, _ in self.workloads}):
            self._watchers.append(asyncio.create_task(self._watch(ns)))

    def _consider(self, pod: dict[str, Any]) -> None:
        """Schedule what a pod needs next, unless something is already scheduled or done for it."""
        w = provider_pods.workload_of(pod, self.workloads.values(), self.owner)
        if w is None:
            return
        uid = str(pod["metadata"].get("uid"))
        if uid in self.handled or uid in self._inflight or uid in self._starting:
            return
        step = provider_pods.step_after_handover(w, pod)
        if step == "start":
            self._starting[uid] = asyncio.create_task(self._start_slowly(pod, w))
        elif step == "fail":
            self._inflight[uid] = asyncio.create_task(self._fail(pod, w))

    async def _watch(self, namespace: str) -> None:
        while True:
            try:
                async for _, obj in self.env.client.watch(Pod, namespace=namespace):
                    self._consider(obj.to_dict())
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a dropped watch is resumed; settle() re-lists anyway
                log.debug("pod watch in %s ended: %s", namespace, exc)
                await asyncio.sleep(0.2)

    async def _start_slowly(self, pod: dict[str, Any], w: WorkloadState) -> None:
        """A pod of a rollout in progress: starting at once, running ``w.start_seconds`` later."""
        uid = str(pod["metadata"]["uid"])
        try:
            if not provider_pods.has_status(pod):
                where = await self.env.where(pod)
                await self.env.write_pod_status(
                    pod, pod_status.starting_status(pod, self.env.now(), where["hostIP"])
                )
            await asyncio.sleep(w.start_seconds)
            fresh = (
                await self.env.client.get(
                    Pod, pod["metadata"]["name"], namespace=pod["metadata"]["namespace"]
                )
            ).to_dict()
            if fresh["metadata"].get("deletionTimestamp") or fresh["metadata"].get("uid") != uid:
                return
            await self.env.write_pod_status(
                fresh, pod_status.running_status(fresh, self.env.now(), await self.env.where(fresh))
            )
            self.handled[uid] = "running"
        except asyncio.CancelledError:
            raise
        except ApiError as exc:
            if exc.status.code != 404:
                self._errors.append(f"pod {pod['metadata'].get('name')}: {exc}")
        except Exception as exc:
            self._errors.append(f"pod {pod['metadata'].get('name')}: {type(exc).__name__}: {exc}")
        finally:
            self._starting.pop(uid, None)

    async def _fail(self, pod: dict[str, Any], w: WorkloadState) -> None:
        uid = str(pod["metadata"]["uid"])
        try:
            at = _next_whole_second(self.env.now())
            await asyncio.sleep(max(0.0, (at - self.env.now()).total_seconds()))
            state = cast(str, w.on_restart)
            status = pod_status.failing_status(pod, state, at, since=at, where=await self.env.where(pod))
            try:
                await self.env.write_pod_status(pod, status)
            except ApiError as exc:
                if exc.status.code == 404:  # deleted meanwhile: nothing to fail
                    self.handled[uid] = "deleted"
                    return
                raise
            for ev in pod_status.kubelet_events(pod, state, at, fresh=True):
                await self.env.create_event(ev)
            self.handled[uid] = state
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._errors.append(f"pod {pod['metadata'].get('name')}: {type(exc).__name__}: {exc}")
        finally:
            self._inflight.pop(uid, None)

    async def _quiet(self) -> bool:
        """Every workload's controllers have caught up and every started pod has its failure."""
        for (ns, name), w in self.workloads.items():
            try:
                dep = (await self.env.client.get(Deployment, name, namespace=ns)).to_dict()
            except ApiError as exc:
                if exc.status.code == 404:
                    continue  # deleted by the agent: its pods go with it
                raise
            if not observed(dep):
                return False
            async for rs in self.env.client.list(ReplicaSet, namespace=ns, labels=dict(w.selector)):
                if not replicaset_settled(rs.to_dict()):
                    return False
            async for p in self.env.client.list(Pod, namespace=ns, labels=dict(w.selector)):
                pod = p.to_dict()
                if provider_pods.workload_of(pod, [w], self.owner) is None:
                    continue
                self._consider(pod)  # a watch event may have been missed: catch up
                if provider_pods.is_live(pod) and not provider_pods.has_status(pod):
                    return False  # its first status is still to be written
        # A rollout's pods still starting are not waited for: "starting" is a state the snapshot shows.
        return not self._inflight

    async def settle(self, timeout: float = 10.0) -> None:
        """Wait until the injected failures are in a stable state (before the "after" snapshot)."""
        if not self.active:
            return
        await wait_until(
            self._quiet,
            bool,
            timeout=timeout,
            timed_out=lambda _: InjectedFailureNotSettled(
                f"injected failures not settled after {timeout:.0f}s ({len(self._inflight)} pods pending)"
            ),
        )
        if self._errors:
            raise InjectedFailureNotSettled("; ".join(self._errors)[:1000])

    async def stop(self) -> None:
        tasks = [*self._watchers, *self._inflight.values(), *self._starting.values()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        self._watchers.clear()
        self._inflight.clear()
        self._starting.clear()
