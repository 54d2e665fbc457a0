"""Kubernetes adapters: environments (provision, snapshot, teardown) and clients."""
