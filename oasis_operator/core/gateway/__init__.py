"""The recording gateway's decisions: what a route may reach, how a call is classified and recorded,
which headers pass, and the agent's bounds. Pure; the server is :mod:`oasis_operator.adapters.gateway`."""
