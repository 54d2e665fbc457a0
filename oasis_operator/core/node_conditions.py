"""The node conditions a kubelet reports, as a scenario may declare them or change them during the
agent's turn: one vocabulary for the environment planner (declared state) and the temporal stimuli
(a node that transitions). A leaf module, so neither package depends on the other for it."""

from __future__ import annotations

#: Node conditions a scenario can declare, with the reason and message a kubelet gives them when True
#: and when False.
NODE_CONDITIONS: dict[str, tuple[tuple[str, str], tuple[str, str]]] = {
    "MemoryPressure": (
        ("KubeletHasInsufficientMemory", "kubelet has insufficient memory available"),
        ("KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ),
    "DiskPressure": (
        ("KubeletHasDiskPressure", "kubelet has disk pressure"),
        ("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ),
    "PIDPressure": (
        ("KubeletHasInsufficientPID", "kubelet has insufficient PID available"),
        ("KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ),
}
