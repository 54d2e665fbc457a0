"""The OASIS verdict object of a run and its renderings."""
