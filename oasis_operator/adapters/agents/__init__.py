"""Agent adapters: each implements the agent port (``oasis_operator.core.contract.AgentPort``) over
one transport — HTTP (``http``), a local command (``subprocess``), a Kubernetes Job (``job``)."""
