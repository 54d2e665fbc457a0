"""The exception tree: one root, three branches, and the reason travelling with every provider fault."""

from __future__ import annotations

import inspect

import pytest

from oasis_operator.core import errors, reasons
from oasis_operator.core.errors import (
    AdapterNotAllowed,
    AgentFault,
    AgentUnavailable,
    AuditBarrierTimeout,
    InjectedFailureNotSettled,
    InvalidInput,
    OasisError,
    ProviderFault,
    ProvisioningError,
    RevocationFailed,
    UnsupportedEntry,
)
from oasis_operator.core.ports import Revocation

BRANCH = {
    "an entry with no realisation is bad input": (UnsupportedEntry("r", "d"), InvalidInput),
    "a refused adapter is bad input (and a ValueError, as before)": (AdapterNotAllowed("no"), ValueError),
    "provisioning is the provider's fault": (ProvisioningError("x"), ProviderFault),
    "an injection that did not settle is the provider's fault": (
        InjectedFailureNotSettled("x"),
        ProviderFault,
    ),
    "a barrier that did not pass is the provider's fault": (AuditBarrierTimeout("x"), ProviderFault),
    "an unclosed window is the provider's fault": (
        RevocationFailed(Revocation(still_allowed=("get pods",))),
        ProviderFault,
    ),
    "an agent that does not identify is the agent's fault": (
        AgentUnavailable(reasons.AGENT_TIMEOUT, "x"),
        AgentFault,
    ),
}


@pytest.mark.parametrize("sentence", sorted(BRANCH))
def test_every_error_has_its_branch_and_the_root(sentence: str) -> None:
    error, branch = BRANCH[sentence]
    assert isinstance(error, branch)
    assert isinstance(error, OasisError)


REASON = {
    "provisioning": (ProvisioningError("x"), reasons.FAULT_PROVISIONING),
    "injection": (InjectedFailureNotSettled("x"), reasons.FAULT_INJECTION),
    "barrier": (AuditBarrierTimeout("x"), reasons.FAULT_AUDIT_BARRIER),
    "revocation": (RevocationFailed(Revocation(still_allowed=("a",))), reasons.FAULT_REVOCATION),
    "an override for one raise": (
        ProvisioningError("x", reason=reasons.FAULT_SYMPTOM_MISSING),
        reasons.FAULT_SYMPTOM_MISSING,
    ),
}


@pytest.mark.parametrize("sentence", sorted(REASON))
def test_a_provider_fault_carries_its_reason_and_metrics_know_it(sentence: str) -> None:
    error, reason = REASON[sentence]
    assert error.reason == reason
    assert reason in reasons.PROVIDER_FAULTS


def test_the_messages_read_as_before() -> None:
    assert str(ProvisioningError("node/x not Ready after 30s")) == "node/x not Ready after 30s"
    assert str(UnsupportedEntry("unknown_condition", "condition 'x' has no defined meaning")) == (
        "condition 'x' has no defined meaning (unknown_condition)"
    )
    assert str(AgentUnavailable(reasons.AGENT_TIMEOUT, "slow")) == "AgentTimeout: slow"
    assert str(RevocationFailed(Revocation(still_allowed=("a", "b")))) == "revocation not verified: a; b"


def test_an_agent_fault_needs_a_known_reason_and_bounds_an_identity_detail() -> None:
    with pytest.raises(ValueError, match="unknown agent failure reason"):
        AgentFault("Whatever", "x")
    assert (
        len(AgentUnavailable(reasons.AGENT_MALFORMED_RESPONSE, "x" * 5000).detail)
        == reasons.AGENT_DETAIL_LIMIT
    )


def test_the_docstring_draws_every_class_of_the_tree() -> None:
    drawn = errors.__doc__ or ""
    classes = [
        name for name, obj in vars(errors).items() if inspect.isclass(obj) and issubclass(obj, OasisError)
    ]
    assert sorted(classes) == sorted(errors.__all__)
    for name in classes:
        assert name in drawn, name
