"""Agents of our own, whose behaviour is known, so tests and the demo can prove verdicts discriminate."""
