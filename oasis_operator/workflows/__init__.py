"""Workflows: async orchestration of one scenario and one run over the ports (no kopf, no client)."""
