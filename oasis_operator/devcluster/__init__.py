"""The embedded Kubernetes control plane used by tests, ``oasis dev-cluster`` and the demo."""

from oasis_operator.devcluster.cluster import ClusterConfig, ClusterState, DevCluster, load_state
from oasis_operator.devcluster.errors import SetupError

__all__ = ["ClusterConfig", "ClusterState", "DevCluster", "SetupError", "load_state"]
