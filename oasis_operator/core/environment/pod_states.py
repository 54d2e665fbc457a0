"""The pod-state table: every state a declared workload's pods can be put in, one row each.

Read by the manifest builders (which declared words name which state, whether the provisioner writes the
pods' status), :mod:`pod_status` (the status and the kubelet Events written for a failing state),
:mod:`symptoms` (what the API must show before the agent is handed the scenario) and the provisioner
(how many of a workload's pods fail). Adding a pod state is a row here. Pure data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class PodState:
    """How one state is realised on simulated pods and how it is recognised afterwards."""

    name: str
    #: Words a scenario declares it with (``status:``), lower case, spaces as underscores.
    words: tuple[str, ...]
    #: The phase the provisioner writes (None: it writes no status; the simulator's or the scheduler's
    #: state is the declared one).
    phase: Literal["Running", "Pending"] | None = None
    #: The waiting reason of the containers of the pods it fails.
    waiting: str | None = None
    #: The last termination it writes (exit code, reason); None: the container never ran.
    last_termination: tuple[int, str] | None = None
    #: The kubelet Events it records: a crash loop's restarts, or an image pull's failures.
    events: Literal["restarts", "image-pull"] | None = None
    #: Which of the workload's pods fail: all, or some and not all (at least one, at most half).
    failing: Literal["all", "some"] = "all"
    #: The last-termination reason the symptom check insists on, where it is what tells the state apart.
    shows_termination: bool = False
    #: The failing container is the pod's last init container (its earlier ones completed): the main
    #: containers never start (waiting PodInitializing) and the pod stays Pending, not Initialized.
    init: bool = False

    @property
    def writes_status(self) -> bool:
        return self.phase is not None

    def fails(self, pods: int) -> int:
        """How many of a workload's ``pods`` running pods the provisioner fails (none when it writes no
        status): all of them, or for a state that fails some, half of them rounded down and at least one."""
        if not self.writes_status:
            return 0
        return pods if self.failing == "all" else min(pods, max(1, pods // 2))


POD_STATES: dict[str, PodState] = {
    s.name: s
    for s in (
        PodState("running", ("running", "healthy")),
        PodState(
            "CrashLoopBackOff",
            ("crashloopbackoff",),
            phase="Running",
            waiting="CrashLoopBackOff",
            last_termination=(1, "Error"),
            events="restarts",
        ),
        PodState(
            "OOMKilled",
            ("oomkilled",),
            phase="Running",
            waiting="CrashLoopBackOff",
            last_termination=(137, "OOMKilled"),
            events="restarts",
            shows_termination=True,
        ),
        PodState(
            "ImagePullBackOff",
            ("error", "imagepullbackoff", "errimagepull"),
            phase="Pending",
            waiting="ImagePullBackOff",
            events="image-pull",
        ),
        # Failing and healthy pods at once.
        PodState(
            "degraded",
            ("degraded",),
            phase="Running",
            waiting="CrashLoopBackOff",
            last_termination=(1, "Error"),
            events="restarts",
            failing="some",
        ),
        # A failing init container (declared ``init_containers`` with ``status: error`` on a workload
        # declared CrashLoopBackOff): the init container crash-loops, the main containers never start
        # (``kubectl get pods``: Init:CrashLoopBackOff; a pod that has just failed once: Init:Error).
        PodState(
            "Init:CrashLoopBackOff",
            (),
            phase="Pending",
            waiting="CrashLoopBackOff",
            last_termination=(1, "Error"),
            events="restarts",
            init=True,
        ),
        # Unschedulable: the real scheduler keeps the pods pending (the builder asks for too much CPU).
        PodState("pending", ("pending",)),
        # A rollout caught halfway (the builder and the failure injector realise it).
        PodState("rolling", ("rolling_update_in_progress", "rolling_update", "rollout_in_progress")),
    )
}

#: Declared word -> state name.
BY_WORD: dict[str, str] = {word: s.name for s in POD_STATES.values() for word in s.words}
