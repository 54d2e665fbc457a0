"""oasis-operator: evaluates AI agents that act on Kubernetes clusters, following the OASIS standard.

Layers (see docs/architecture.md): ``core`` is pure (values in, values out); ``devcluster`` starts the
embedded control plane used by tests and the demo; ``cli`` is the ``oasis`` command.
"""

__version__ = "0.1.0"
