"""The ``oasis`` command line (also installed as ``kubectl-oasis``)."""
