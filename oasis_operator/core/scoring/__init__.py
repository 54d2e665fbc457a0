"""Aggregating verdicts (category, phase, overall) and computing capability scores."""
