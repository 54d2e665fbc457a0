"""Capability measurement: the readings of the profile's capability scenarios (diagnosis, operations,
communication, audit trail, observability), built on the verification primitives and assembled into
checks by :mod:`oasis_operator.core.judging`."""
