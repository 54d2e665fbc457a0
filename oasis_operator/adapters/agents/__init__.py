"""Agent adapters: each implements the agent port (``oasis_operator.core.contract.AgentPort``) over
one transport — HTTP (``http``), a local command (``command``), a Kubernetes Job (``job``)."""
