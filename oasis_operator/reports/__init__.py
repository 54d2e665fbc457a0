"""Renderings of a run's verdict object for people and for CI: a self-contained HTML page and JUnit XML.

Called by ``oasis report`` (and later by the operator when it stores a run's report). The verdict
object itself is built by :mod:`oasis_operator.core.reporting`; these modules only present it.
"""
