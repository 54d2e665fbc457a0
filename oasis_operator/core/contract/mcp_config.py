"""The MCP client configuration an agent is handed (decision 0112): the ``mcpServers`` JSON that common
MCP clients read, built from the request's ``environment.mcp_endpoints``.

Each server is Streamable HTTP (``"type": "http"``) at its URL, with the scenario's token as the bearer
header. The subprocess adapter writes it to a private file and names the file in :data:`MCP_CONFIG_ENV`.
Pure: values in, values out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oasis_operator.core.contract.agent import ToolEndpoint

__all__ = ["MCP_CONFIG_ENV", "MCP_SERVER", "mcp_client_config"]

#: The recording gateway's MCP server's name in ``mcp_endpoints`` and in the client configuration.
MCP_SERVER = "tools"
#: The environment variable that names the client configuration file of a subprocess agent.
MCP_CONFIG_ENV = "OASIS_MCP_CONFIG"


def mcp_client_config(endpoints: Mapping[str, ToolEndpoint]) -> dict[str, Any]:
    """``{"mcpServers": {name: {"type": "http", "url", "headers": {"Authorization": "Bearer ..."}}}}``."""
    return {
        "mcpServers": {
            name: {"type": "http", "url": e.url, "headers": {"Authorization": f"Bearer {e.token}"}}
            for name, e in sorted(endpoints.items())
        }
    }
