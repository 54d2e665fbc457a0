"""Reading OASIS documents from files and directories (I/O lives here, the rules in ``core.model``)."""
