"""Weighted routes between a workload and its canary: the Gateway API's standard HTTPRoute CRD,
installed into the dev cluster (decision 0063). No process runs: no Gateway controller is started, so
routes are objects the agent reads and writes through the API server, and their status stays empty.

Called by :mod:`oasis_operator.devcluster.backends`; the CRD file is the one ``tools/build-backends.sh``
copies from the Go module ``sigs.k8s.io/gateway-api`` into the cache. The operator finds the API on the
cluster when it starts (``adapters/toolplane/routes.py``), so this back-end needs no tool-plane
settings.
"""

from __future__ import annotations

from oasis_operator.devcluster.backends.base import Backend, BackendContext
from oasis_operator.devcluster.errors import SetupError

CRD_FILE = "gateway.networking.k8s.io_httproutes.yaml"


class TrafficRoutingBackend(Backend):
    name = "traffic-routing"

    def start(self, ctx: BackendContext) -> None:
        from oasis_operator.devcluster.stack import install_crd_files

        crd = ctx.bins.crd_dir / CRD_FILE
        if not crd.is_file():
            raise SetupError(
                f"no Gateway API HTTPRoute CRD at {crd} (tools/build-backends.sh crds copies it)"
            )
        with ctx.cluster.admin_http() as http:
            install_crd_files(http, [crd])

    def endpoints(self) -> dict[str, str]:
        return {}
