"""Adapters: the I/O side of each port (agents, Kubernetes, audit, metrics), independent of each other."""
