"""Every reason the operator writes, in one place: faults, exclusions, conditions, Events, and the
lengths text is cut to.

Read by the run status table (:mod:`oasis_operator.core.run_status`), the run and scenario workflows,
the agent adapters, the exception tree (:mod:`oasis_operator.core.errors`) and the metrics adapter;
each constant says when it is written and what it means. CamelCase reasons are also Kubernetes
condition and Event reasons; lower-case ones are the human-readable ``reason`` of a scenario in the
run's status. Changing a value changes the API: users' alerts, dashboards and ``kubectl wait``
commands read them.

The validation reasons of the verification engine (why a scenario cannot be judged,
``REASON_*`` in :mod:`oasis_operator.core.verification`) belong to that engine's issue lists and
stay beside the rules that raise them.
"""

from __future__ import annotations

from typing import Final

# -- provider faults: a scenario's PROVIDER_FAILURE, and why (also metric labels and Event details) ----

#: The environment could not be established as declared (objects not created, not admitted, not
#: Ready in time, a token not issued).
FAULT_PROVISIONING: Final = "ProvisioningFailed"
#: The environment was created, but a declared state (a pod's failure, a rollout) was not observed.
FAULT_SYMPTOM_MISSING: Final = "DeclaredStateNotObserved"
#: The sentinel request never appeared in the audit stream: the evidence may be incomplete.
FAULT_AUDIT_BARRIER: Final = "AuditBarrierTimeout"
#: The "before" or "after" snapshot of the scenario's state could not be read.
FAULT_SNAPSHOT: Final = "SnapshotFailed"
#: A failure injected into what the agent started did not settle before the "after" snapshot.
FAULT_INJECTION: Final = "InjectedFailureNotSettled"
#: The agent's access could not be revoked, or a principal seen acting can still do something.
FAULT_REVOCATION: Final = "RevocationNotVerified"
#: ``timeouts.scenario`` cut the scenario off; no verdict rests on a cut window.
FAULT_SCENARIO_TIMEOUT: Final = "ScenarioTimeout"
#: A tool-plane back-end (logs, dashboards...) is unreachable, or a scenario's declared data could not
#: be injected into it and read back before the agent's turn (or a timed change during it).
FAULT_TOOLPLANE: Final = "ToolPlaneInjectionFailed"
#: The recording gateway cannot vouch for the tool calls it recorded (a call not recorded, a back-end that
#: did not answer or timed out: decision 0096).
FAULT_TOOL_GATEWAY: Final = "ToolGatewayFault"
#: A stimulus to be delivered during the agent's turn (a temporal condition) could not be applied, or a
#: tool output injection found a place in no answer the agent got (decision 0096).
FAULT_STIMULUS: Final = "StimulusNotDelivered"
#: No target control plane could be had for the scenario (it did not start, or died under it:
#: decision 0100); nothing of the scenario ran there, or what ran is not trusted.
FAULT_TARGET: Final = "TargetUnavailable"
#: Audit events that may be the scenario's were lost where they arrived: a webhook batch that was not
#: valid UTF-8 JSON, a malformed line of the audit log file (decision 0096).
FAULT_AUDIT_LOSS: Final = "AuditEventsLost"
#: A provider fault with no more precise reason (the base of the tree in :mod:`~oasis_operator.core.errors`).
FAULT_PROVIDER: Final = "ProviderFault"

#: Every provider fault a scenario can end with: metric label values known in advance.
PROVIDER_FAULTS: Final = (
    FAULT_PROVISIONING,
    FAULT_SYMPTOM_MISSING,
    FAULT_AUDIT_BARRIER,
    FAULT_SNAPSHOT,
    FAULT_INJECTION,
    FAULT_REVOCATION,
    FAULT_SCENARIO_TIMEOUT,
    FAULT_TOOLPLANE,
    FAULT_TOOL_GATEWAY,
    FAULT_STIMULUS,
    FAULT_TARGET,
    FAULT_AUDIT_LOSS,
)

# -- agent faults: an AgentOutcome with status AGENT_FAILURE (decision 0030), never a provider fault --

#: The agent's response carried an ``agent_failure`` report; its cause is the detail.
AGENT_REPORTED: Final = "AgentReportedFailure"
#: No complete answer within the scenario's time budget (slow, trickling, or never answering).
AGENT_TIMEOUT: Final = "AgentTimeout"
#: The agent answered with an HTTP status other than 2xx.
AGENT_HTTP_ERROR_STATUS: Final = "AgentHTTPErrorStatus"
#: The answer was not JSON, not an object, or broke the contract's field rules.
AGENT_MALFORMED_RESPONSE: Final = "AgentMalformedResponse"
#: The answer exceeded the size limit; reading stopped at the limit and nothing of it was kept.
AGENT_OUTPUT_TOO_LARGE: Final = "AgentOutputTooLarge"
#: The connection was closed or reset before a complete answer arrived.
AGENT_CONNECTION_RESET: Final = "AgentConnectionReset"
#: No connection could be made: refused, unresolvable, or TLS verification failed.
AGENT_CONNECTION_FAILED: Final = "AgentConnectionFailed"
#: The agent process (or its pod) ended unsuccessfully: a non-zero exit, or a signal.
AGENT_PROCESS_FAILED: Final = "AgentProcessFailed"
#: The agent could not be started, or its output could not be collected at all (command not found,
#: Job not admitted, the pod's log unavailable).
AGENT_LAUNCH_FAILED: Final = "AgentLaunchFailed"

#: Every reason an agent failure can carry.
AGENT_FAILURE_REASONS: Final = frozenset(
    {
        AGENT_REPORTED,
        AGENT_TIMEOUT,
        AGENT_HTTP_ERROR_STATUS,
        AGENT_MALFORMED_RESPONSE,
        AGENT_OUTPUT_TOO_LARGE,
        AGENT_CONNECTION_RESET,
        AGENT_CONNECTION_FAILED,
        AGENT_PROCESS_FAILED,
        AGENT_LAUNCH_FAILED,
    }
)

# -- run conditions (Ready, Reconciling, Stalled, Succeeded, Completed all carry the same reason) -----

#: Before the operator wrote anything (the CRD's status default).
PENDING: Final = "Pending"
#: The run is being driven: preparing, running scenarios, storing the report.
PROGRESSING: Final = "Progressing"
#: ``spec.suspend``: nothing starts; a suspended run is not done (Reconciling=True).
SUSPENDED: Final = "Suspended"
#: Finished: the safety verdict is PASS (the only reason with Succeeded=True).
PASSED: Final = "Passed"
#: Finished: a safety scenario FAILed.
SAFETY_FAILED: Final = "SafetyFailed"
#: Finished: the evidence was incomplete somewhere (PROVIDER_FAILURE), or nothing could be judged.
PROVIDER_FAILURE: Final = "ProviderFailure"
#: Finished: a safety scenario was UNEVALUABLE (the agent failed, the evidence shows no violation).
UNEVALUABLE: Final = "Unevaluable"
#: Finished: what ran passed, but the evaluation is incomplete (decision 0105: an opted-in incomplete
#: run, an unbacked tier, coverage below the minimum, scenarios not executed): no conformance claim,
#: and no gate opens on it.
INCOMPLETE: Final = "Incomplete"
#: Finished by ``spec.shutdown`` (Graceful or Immediate).
CANCELLED: Final = "Cancelled"
#: Finished before it started: the spec does not validate.
INVALID_SPEC: Final = "InvalidSpec"
#: Finished before it started: the evidence path is broken (the audit round trip of the preflight did
#: not pass, or a configured tool-plane back-end did not answer its self-test; decision 0057).
PREFLIGHT_FAILED: Final = "PreflightFailed"
#: The Preflight condition: every provider-conformance requirement, self-test and the tier claim met.
PREFLIGHT_PASSED: Final = "PreflightPassed"
#: The Preflight condition (and a Warning Event): the evidence path works, but requirements of the
#: profile or the tier claim are not met. Unmet requirements end the run before it starts (no verdict
#: file) unless ``spec.incomplete`` opts in; then, as for an unbacked tier, the run goes on, its report
#: is incomplete and claims nothing (decision 0105).
REQUIREMENTS_UNMET: Final = "ProviderRequirementsUnmet"
#: Finished before it started: the operator refuses the run's agent adapter.
ADAPTER_NOT_ALLOWED: Final = "AdapterNotAllowed"
#: ``timeouts.run`` passed, before the run could start or while it ran.
TIMED_OUT: Final = "TimedOut"

# Waiting for something that does not exist yet (Reconciling=True; TimedOut once timeouts.run passes).
#: The run's Profile does not exist in its namespace yet.
PROFILE_NOT_FOUND: Final = "ProfileNotFound"
#: The run's Profile exists but does not validate (an edit the API server accepted, the model refuses).
PROFILE_INVALID: Final = "ProfileInvalid"
#: A Scenario of the run's suite, or any Scenario for its selector, does not exist yet.
SCENARIOS_NOT_FOUND: Final = "ScenariosNotFound"
#: The agent does not answer its identity question yet, or its credentials Secret does not exist.
AGENT_NOT_READY: Final = "AgentNotReady"
WAITING_REASONS: Final = (PROFILE_NOT_FOUND, PROFILE_INVALID, SCENARIOS_NOT_FOUND, AGENT_NOT_READY)

# -- Events on the EvaluationRun (besides the condition reasons above, which are Events too) ----------

#: Prepared: the agent answered who it is; how many scenarios will run.
EVENT_RUN_STARTED: Final = "RunStarted"
#: The terminal status is about to be written; the message is the summary.
EVENT_RUN_COMPLETED: Final = "RunCompleted"
#: ``spec.shutdown`` ended the run.
EVENT_RUN_CANCELLED: Final = "RunCancelled"
#: A scenario ended in PASS.
EVENT_SCENARIO_PASSED: Final = "ScenarioPassed"
#: A scenario ended in FAIL; the message names what failed and the deciding event.
EVENT_SCENARIO_FAILED: Final = "ScenarioFailed"
#: A scenario ended UNEVALUABLE (an agent failure).
EVENT_SCENARIO_UNEVALUABLE: Final = "ScenarioUnevaluable"
#: A scenario ended without a verdict of its own.
EVENT_SCENARIO_EXCLUDED: Final = "ScenarioExcluded"
#: A scenario ended in PROVIDER_FAILURE (the same word as the condition reason).
EVENT_PROVIDER_FAILURE: Final = PROVIDER_FAILURE

# -- why a scenario has no verdict of its own (the ``reason`` of an Excluded scenario in status) ------

#: Pending when the run was cancelled.
NOT_RUN_CANCELLED: Final = "not run: cancelled"
#: Running when the run was cancelled (Immediate stops it; Graceful lets it finish).
NOT_FINISHED_CANCELLED: Final = "not finished: cancelled"
#: Pending when a scenario ended in PROVIDER_FAILURE (the run aborts: nothing new starts).
NOT_RUN_ABORTED: Final = "not run: the run was aborted"
#: A capability scenario, when the safety phase did not pass (Phase 2 runs only after a PASS).
NOT_RUN_SAFETY_NOT_PASSED: Final = "not run: the safety phase did not pass"
#: Running when ``timeouts.run`` passed (torn down; the run is aborted).
NOT_FINISHED_RUN_TIMEOUT: Final = "not finished: timeouts.run was exceeded"

#: The abort reason of a run one of whose scenarios ended in PROVIDER_FAILURE.
ABORT_PROVIDER_FAILURE: Final = "a scenario ended in PROVIDER_FAILURE"
#: The prefix of a scenario's reason when the harness itself raised (its verdict: PROVIDER_FAILURE).
HARNESS_ERROR: Final = "harness error"

# -- lengths: how much text each place keeps -----------------------------------------------------------

#: A scenario's ``reason`` in the run's status (status stays small; the report has the rest).
ENTRY_REASON_LIMIT: Final = 300
#: The run's ``abortReason``.
ABORT_REASON_LIMIT: Final = 500
#: The run's ``message`` (status and printer column).
MESSAGE_LIMIT: Final = 2000
#: A fault recorded with a scenario (``fault`` in the report).
FAULT_LIMIT: Final = 1000
#: A condition's message (the CRD allows 32768).
CONDITION_MESSAGE_LIMIT: Final = 32000
#: An Event's message (the API's limit).
EVENT_MESSAGE_LIMIT: Final = 1024
#: Details that come partly from the agent (an error body, stderr).
AGENT_DETAIL_LIMIT: Final = 1024


#: Characters that are never shown as they are (decision 0099): they steer a terminal or a
#: renderer rather than show something. Bidirectional overrides and isolates reorder what a reader
#: sees; U+FFFE and U+FFFF are not characters (nor valid XML).
_BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_NONCHARACTERS = frozenset("\ufffe\uffff")


def _escaped(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _hidden(char: str, keep: str) -> bool:
    code = ord(char)
    if char in keep:
        return False
    return (
        code < 0x20
        or 0x7F <= code < 0xA0  # DEL and the C1 controls (0x9b is a terminal's CSI)
        or 0xD800 <= code < 0xE000  # a lone surrogate: no text encoding can write it
        or char in _BIDI_CONTROLS
        or char in _NONCHARACTERS
    )


def printable(text: str, *, keep: str = "") -> str:
    """``text`` with every control character, lone surrogate, bidirectional control and
    non-character written as a visible escape (``\\x1b``, ``\\u202e``), so that nothing an agent
    wrote can steer the terminal, page or parser that shows it. ``keep`` lists characters left as
    they are (a report keeps ``"\\n\\t"`` for its multi-line texts). The result is valid UTF-8 and
    valid XML 1.0 character data."""
    if text.isprintable() and not any(c in _BIDI_CONTROLS or c in _NONCHARACTERS for c in text):
        return text
    return "".join(_escaped(c) if _hidden(c, keep) else c for c in text)


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters and made :func:`printable`: every status message,
    condition and Event goes through here, and some carry what an agent said."""
    return printable(text)[:limit]


def bounded(text: str, limit: int = AGENT_DETAIL_LIMIT) -> str:
    """Untrusted ``text`` made :func:`printable` and cut to ``limit`` characters, saying that it
    was cut."""
    text = printable(text)
    if len(text) <= limit:
        return text
    marker = f"... [{len(text) - limit} more characters]"
    return text[: max(0, limit - len(marker))] + marker
