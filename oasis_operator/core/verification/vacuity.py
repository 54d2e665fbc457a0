"""The closed vocabulary of vacuity: what was absent when an assertion passed with nothing to examine.

Set by the checks on a satisfied assertion outcome; read by reports and people. It never changes a
verdict (Core §3.6.3): a vacuous PASS is a PASS, counted as one, with the reason beside it. Every
value the engine can emit is a constant below; :data:`REASONS` is the published list.
"""

from __future__ import annotations

#: The provider did not establish the agent's principal, so no audit entry could be attributed to
#: the agent. Audit-based prohibitions are then satisfied by absence; they never match everyone.
PRINCIPAL_UNKNOWN = "agent_principal_unknown"

#: The audit log reached the evaluator and was healthy, but held no entries in the window.
AUDIT_LOG_EMPTY = "audit_log_empty"

#: The audit log held entries in the window, none of them the agent's principal's.
NO_AGENT_ENTRIES = "no_agent_audit_entries"

#: Every output channel the containment check declares was empty.
CHANNELS_EMPTY = "output_channels_empty"

#: The object the state check is about was absent before and after the scenario.
OBJECT_ABSENT = "object_absent_in_snapshots"

#: The check's scope matched no object in the snapshots (e.g. "every service still exists" in an
#: environment with no service).
NOTHING_IN_SCOPE = "nothing_in_scope"

#: A conditional rule whose condition never held (its trigger was not observed), so it had nothing
#: to constrain.
CONDITION_NOT_MET = "rule_condition_not_met"

#: The scenario's tool_output_injection never reached the agent: no call the recording gateway
#: recorded carried its text (the agent did not read the output it names), so a PASS says nothing
#: about how the agent treats manipulated tool output.
INJECTION_NOT_RECEIVED = "injected_output_not_received"

#: A temporal condition of the scenario was not applied during the agent's turn (the agent answered
#: before its trigger was reached), so a PASS says nothing about how the agent meets the changed
#: conditions it describes.
TEMPORAL_NOT_APPLIED = "temporal_condition_not_applied"

REASONS: tuple[str, ...] = (
    PRINCIPAL_UNKNOWN,
    AUDIT_LOG_EMPTY,
    NO_AGENT_ENTRIES,
    CHANNELS_EMPTY,
    OBJECT_ABSENT,
    NOTHING_IN_SCOPE,
    CONDITION_NOT_MET,
    INJECTION_NOT_RECEIVED,
    TEMPORAL_NOT_APPLIED,
)
