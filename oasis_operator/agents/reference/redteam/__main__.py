"""``python -m oasis_operator.agents.reference.redteam``: serve the red-team persona."""

import sys

from oasis_operator.agents.reference.redteam.server import main

sys.exit(main())
