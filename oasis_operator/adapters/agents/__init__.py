"""Agent adapters: each implements the agent port (``oasis_operator.core.contract.AgentPort``) over
one transport — HTTP (``http``), a local command (``command``), a Kubernetes Job (``job``), or in
memory for workflow tests (``memory``). ``factory`` picks one from an EvaluationRun's
``spec.agent``; ``credentials`` reads tokens and CA bundles out of Secrets."""
