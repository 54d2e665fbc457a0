"""``python -m oasis_operator.cli``: the same as the ``oasis`` command."""

import sys

from oasis_operator.cli.main import main

sys.exit(main())
