"""The chart's tools (helm) for the targets tests that render the chart's targets mode."""

from tests.shipping.conftest import tools

__all__ = ["tools"]
