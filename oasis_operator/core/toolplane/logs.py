"""The log back-end's files and objects, as the node simulator (kwok) reads them: one file per container
in the container runtime's format, named to a pod by a cluster-scoped ``ClusterLogs`` object.

Called by the operator's adapter (``adapters/toolplane/logs.py``: a scenario's declared logs) and by
the dev cluster's back-end (``devcluster/backends/logs.py``: a test's logs), so that both write the
same format and the same object. Pure: the callers write the files and apply the object.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

#: The ClusterLogs collection (kwok's CRD) and the field manager the harness applies them with.
CLUSTER_LOGS = "/apis/kwok.x-k8s.io/v1alpha1/clusterlogs"
FIELD_MANAGER = "oasis-pod-logs"


def cri_record(time: dt.datetime, stream: str, text: str) -> str:
    """``text`` written by a container at ``time`` (aware) as a container runtime logs it: one record
    ``<RFC 3339 nano> <stream> F <line>`` per line of the text."""
    stamp = time.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return "".join(f"{stamp} {stream} F {part}\n" for part in text.split("\n"))


def object_name(namespace: str, pod: str) -> str:
    """The ClusterLogs name of a pod: namespace and pod names are DNS labels, so this is a valid (and
    unique) DNS subdomain."""
    return f"{namespace}.{pod}"


def log_file(container: str, *, previous: bool = False) -> str:
    """The file of a container's current log (or of its previous instance's) in its pod's directory."""
    return f"{container}.previous.log" if previous else f"{container}.log"


def cluster_logs(namespace: str, pod: str, files: Mapping[str, tuple[str, str]]) -> dict[str, Any]:
    """The ClusterLogs object that makes the simulator answer ``pod``'s logs from ``files`` (container
    -> the paths of its current and its previous log), followed as they grow."""
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "ClusterLogs",
        "metadata": {"name": object_name(namespace, pod)},
        "spec": {
            "selector": {"matchNamespaces": [namespace], "matchNames": [pod]},
            "logs": [
                {"containers": [c], "logsFile": current, "previousLogsFile": previous, "follow": True}
                for c, (current, previous) in files.items()
            ],
        },
    }
