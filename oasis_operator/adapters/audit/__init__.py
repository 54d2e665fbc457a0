"""Audit sources: where the evidence of what an agent did comes from (file tail, webhook receiver)."""
