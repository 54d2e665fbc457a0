"""The recording gateway: an HTTP reverse proxy in the operator between the agent and the tool plane's
back-ends (decision 0053)."""

from oasis_operator.adapters.gateway.route import Route
from oasis_operator.adapters.gateway.server import ToolGateway

__all__ = ["Route", "ToolGateway"]
