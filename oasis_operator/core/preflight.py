"""The preflight: what this provider really does, checked against the profile's provider-conformance
requirements and the run's tier before any scenario runs (decision 0057).

Called by the run workflow's preflight step (``workflows/preflight.py``), which gathers the facts
only the world can tell (the audit round trip, each configured tool-plane back-end's self-test); the
facts that follow from this code (which state it can inject, which evidence it reads, that simulated
pods exchange no traffic) are stated here, next to the tables they come from. Turns them into one
:class:`Check` per requirement key of the profile, per self-test and for the tier claim, each met or
not with its reason and what not meeting it excludes. Pure: values in, values out.

Three kinds of failure, three consequences (decisions 0057, 0105):

- a self-test that fails (the audit stream did not show the probe request, a configured back-end did
  not answer) means the evidence path is broken: the run ends before any scenario, without a verdict
  (:attr:`PreflightResult.ends_run`);
- a provider-conformance requirement this provider does not meet (provider conformance §3.8): the run
  does not start, no verdict file is written, unless its spec opts in to an ``incomplete``
  evaluation (:attr:`PreflightResult.blocking`);
- a tier claim the environment does not back (provider conformance §3.6): the run goes on, labelled
  incomplete, without a conformance claim.

Every unmet required check, of either of the last two kinds, is in :attr:`PreflightResult.unmet`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import semver

from oasis_operator.core.environment.support import (
    SUPPORTED_INTERFACE_TYPES,
    UNSUPPORTED_INTERFACE_TYPES,
    UNSUPPORTED_STIMULI,
    environmental_gaps,
)
from oasis_operator.core.kinds import NON_KUBERNETES_KINDS, NOT_YET_KINDS
from oasis_operator.core.model.profile import ConformanceRequirement, Profile, ProviderConformance
from oasis_operator.core.reporting.provenance import OASIS_CORE_VERSION
from oasis_operator.core.toolplane import registry

__all__ = [
    "REQUIREMENT",
    "SELF_TEST",
    "TIER",
    "AuditRoundTrip",
    "BackendProbe",
    "Check",
    "PreflightResult",
    "ProviderFacts",
    "declaration",
    "preflight",
    "tier_lines",
    "tiers_of",
    "unmet_lines",
]

#: What a check is about (``kind`` of a :class:`Check`).
REQUIREMENT: Final = "requirement"
SELF_TEST: Final = "self-test"
TIER: Final = "tier"

AUDIT_ROUND_TRIP: Final = "audit round trip"
ENVIRONMENT_TYPE: Final = "kubernetes-cluster"
#: Observation types this provider reads without any condition but a live audit stream.
EVIDENCE_SOURCES: Final = ("resource_state", "state_diff", "value_containment")

#: What not meeting each SI requirement key excludes (the profile's own description is used for a key
#: not listed here).
EXCLUDES: Final[Mapping[str, str]] = {
    "environment_type": "every scenario: they are written against the Kubernetes API",
    "complexity_tier_supported": "the run's tier claim: the report is incomplete and makes no conformance claim",
    "oasis_core_spec_version": "the meaning of every verdict under this profile",
    "evidence_sources_available": "every assertion that reads a missing observation type",
    "value_containment_support": "the value_containment checks of the data-exfiltration scenarios",
    "state_injection": "scenarios that declare state or stimuli this provider cannot realise (each is listed "
    "as not executed, with its reason)",
    "audit_policy_installation": "every assertion judged from the audit log",
    "network_policy_enforcement": "the traffic side of zone-boundary scenarios: they are judged on the agent's "
    "API actions only, a NetworkPolicy is never exercised by traffic",
}


@dataclass(frozen=True)
class AuditRoundTrip:
    """The harness's probe request, looked for in the audit stream. ``observed``: it arrived within the
    deadline; ``seconds``: how long that took (or how long was waited); ``detail``: what was seen."""

    observed: bool
    seconds: float
    detail: str


@dataclass(frozen=True)
class BackendProbe:
    """One configured tool-plane back-end's self-test: ``reachable`` True or False, or None when the
    back-end has no self-test."""

    name: str
    reachable: bool | None
    detail: str


@dataclass(frozen=True)
class ProviderFacts:
    """What the shell found out about this provider's world just now."""

    audit: AuditRoundTrip
    #: The tool-plane back-ends the operator was configured with.
    backends: frozenset[str] = frozenset()
    probes: tuple[BackendProbe, ...] = ()


@dataclass(frozen=True)
class Check:
    """One line of the preflight: a requirement key, a self-test, or the tier claim."""

    kind: str
    name: str
    met: bool
    reason: str
    #: What not meeting it excludes ("" when met).
    excludes: str = ""
    #: A requirement the profile marks optional never makes the run incomplete.
    required: bool = True
    declared: Any = None
    expected: Any = None

    def record(self) -> dict[str, Any]:
        """The check as the report and the run's status carry it."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "name": self.name,
            "met": self.met,
            "required": self.required,
            "reason": self.reason,
        }
        if not self.met:
            out["excludes"] = self.excludes
        if self.kind == REQUIREMENT:
            out["declared"] = self.declared
            out["expected"] = self.expected
        return out


@dataclass(frozen=True)
class PreflightResult:
    checks: tuple[Check, ...]
    #: The tier claim's environment requirements: ``{requirement, verified, reason}`` each.
    tier_requirements: tuple[Mapping[str, Any], ...] = field(default=())

    @property
    def failed_self_tests(self) -> list[Check]:
        return [c for c in self.checks if c.kind == SELF_TEST and not c.met and c.required]

    @property
    def ends_run(self) -> bool:
        """The evidence path is broken: no scenario may run, and no verdict is given."""
        return bool(self.failed_self_tests)

    @property
    def unmet(self) -> list[Check]:
        """Declared gaps: an evaluation that runs despite them is incomplete, without a conformance claim."""
        return [c for c in self.checks if c.kind != SELF_TEST and not c.met and c.required]

    @property
    def blocking(self) -> list[Check]:
        """Unmet provider-conformance requirements (provider conformance §3.8): the run does not start
        unless its spec opts in to an incomplete evaluation (decision 0105). An unbacked tier claim
        (§3.6) only labels the evaluation incomplete."""
        return [c for c in self.unmet if c.kind == REQUIREMENT]

    def records(self) -> list[dict[str, Any]]:
        return [c.record() for c in self.checks]

    def summary(self) -> str:
        """``metadata.environment.conformance_check`` of the report: the outcome in a sentence."""
        reqs = [c for c in self.checks if c.kind == REQUIREMENT]
        tests = [c for c in self.checks if c.kind == SELF_TEST]
        if self.ends_run:
            broken = "; ".join(f"{c.name}: {c.reason}" for c in self.failed_self_tests)
            return f"preflight failed, the evidence path is broken ({broken}): no scenario was run"
        met = sum(1 for c in reqs if c.met)
        text = (
            f"{met} of {len(reqs)} provider-conformance requirements of the profile met; "
            f"{sum(1 for c in tests if c.met)} of {len(tests)} evidence-path self-tests passed"
        )
        if self.unmet:
            text += (
                "; unmet: "
                + ", ".join(c.name for c in self.unmet)
                + " (no conformance claim"
                + ("; the run starts only as an incomplete evaluation)" if self.blocking else ")")
            )
        return text

    def tier_evidence(self, tier: int) -> str:
        verified = sum(1 for r in self.tier_requirements if r.get("verified"))
        total = len(self.tier_requirements)
        if not total:
            return f"tier {tier}: the profile declares no environment requirements for it"
        if verified == total:
            return f"tier {tier}: all {total} environment requirement(s) of the profile verified at preflight"
        return (
            f"tier {tier} claimed; not verified: {verified} of {total} environment requirement(s) of the "
            f"profile verified at preflight (the report is incomplete)"
        )


# -- what this provider declares ---------------------------------------------------------------------
def _state_gaps(usable: frozenset[str]) -> list[str]:
    """What of the provider guide's state and stimuli this provider cannot realise, given ``usable``."""
    gaps = []
    for kind in sorted(NON_KUBERNETES_KINDS):
        backend = registry.STATE_KIND_BACKENDS.get(kind)
        if backend is None or backend not in usable:
            gaps.append(f"state kind {kind}")
    gaps += [f"state kind {kind}" for kind in sorted(NOT_YET_KINDS)]
    gaps += [f"stimulus {kind}" for kind in sorted(UNSUPPORTED_STIMULI)]
    gaps += [f"stimulus environmental_state ({form})" for form in environmental_gaps(usable)]
    return gaps


_CONNECTIVES = re.compile(r"\b(and|or)\b|[,;]")


def _interface_ids() -> list[str]:
    ids = set(SUPPORTED_INTERFACE_TYPES) | set(UNSUPPORTED_INTERFACE_TYPES) | set(registry.INTERFACE_BACKENDS)
    return sorted(ids, key=len, reverse=True)  # longest first: no id is matched inside a longer one


def _interface_gap(interface: str, usable: frozenset[str], configured: frozenset[str]) -> str | None:
    if interface in SUPPORTED_INTERFACE_TYPES:
        return None
    backends = registry.INTERFACE_BACKENDS.get(interface)
    if backends is None:
        return f"{interface}: {UNSUPPORTED_INTERFACE_TYPES.get(interface, 'not supplied by this provider')}"
    for b in backends:
        if b not in usable:
            return f"{interface}: {registry.missing_reason(b, configured) or b + ' is not usable'}"
    return None


def tier_lines(
    lines: Sequence[str], usable: frozenset[str], configured: frozenset[str]
) -> list[dict[str, Any]]:
    """Each environment requirement of a tier, verified or not, with why. A requirement is verified
    only when it names interface types and nothing else, and every one of them is supplied (the
    back-ends they need are usable); prose this provider has no check for is never taken as met."""
    ids = _interface_ids()
    out = []
    for line in lines:
        rest = line
        named = []
        for i in ids:
            pattern = re.compile(rf"(?<![\w-]){re.escape(i)}(?![\w-])")
            if pattern.search(rest):
                named.append(i)
                rest = pattern.sub(" ", rest)
        leftover = " ".join(_CONNECTIVES.sub(" ", rest).split())
        gaps = [g for g in (_interface_gap(i, usable, configured) for i in sorted(named)) if g]
        if gaps:
            out.append({"requirement": line, "verified": False, "reason": "; ".join(gaps)})
        elif leftover:
            supplied = f"{', '.join(sorted(named))} supplied, but " if named else ""
            out.append(
                {
                    "requirement": line,
                    "verified": False,
                    "reason": f"{supplied}this provider has no check that establishes it",
                }
            )
        else:
            out.append(
                {"requirement": line, "verified": True, "reason": "supplied: " + ", ".join(sorted(named))}
            )
    return out


def _supported_tier(
    tiers: Mapping[int, Sequence[str]], usable: frozenset[str], configured: frozenset[str]
) -> int:
    """The highest tier every environment requirement of which (and of each lower tier) is verified; 0
    when not even tier 1 is."""
    best = 0
    for tier in sorted(tiers):
        if tier != best + 1 or not all(r["verified"] for r in tier_lines(tiers[tier], usable, configured)):
            break
        best = tier
    return best


def declaration(
    facts: ProviderFacts, tiers: Mapping[int, Sequence[str]]
) -> tuple[dict[str, Any], dict[str, str]]:
    """This provider's answer to a conformance query (the SI requirement keys), and the basis of
    each value. Honest by construction: a value is true only where this code, or the self-test just
    made, establishes it."""
    usable = registry.usable(facts.backends)
    gaps = _state_gaps(usable)
    sources = ["audit_log", *EVIDENCE_SOURCES] if facts.audit.observed else list(EVIDENCE_SOURCES)
    verified = _supported_tier(tiers, usable, facts.backends)
    # The schema's floor (1, 2 or 3): the tier-1 shape is what every environment of this provider is,
    # a Kubernetes API with its resource types, RBAC and the audit log (provider conformance §3.2).
    # Whether it meets the profile's lines for the tier is the tier check (§3.6), which labels an
    # evaluation incomplete; the verified tier is never inflated above what it verifies.
    tier = max(1, verified)
    values: dict[str, Any] = {
        "environment_type": ENVIRONMENT_TYPE,
        "complexity_tier_supported": tier,
        "oasis_core_spec_version": [OASIS_CORE_VERSION],
        "evidence_sources_available": sorted(sources),
        "value_containment_support": True,
        "state_injection": not gaps,
        "audit_policy_installation": facts.audit.observed,
        "network_policy_enforcement": False,
    }
    basis = {
        "environment_type": "scenarios run in namespace sets of the Kubernetes cluster the operator runs against",
        "complexity_tier_supported": (
            f"every environment requirement of tier {tier} and below is verified"
            if verified
            else "tier 1, the lowest tier: a Kubernetes API with its resource types, RBAC and the audit "
            "log; not every environment requirement of the profile's tier 1 is verified, so an "
            "evaluation at tier 1 is labelled incomplete (the tier check)"
        ),
        "oasis_core_spec_version": f"this implementation follows OASIS core {OASIS_CORE_VERSION}",
        "evidence_sources_available": (
            "audit log (the probe request was observed), resource state and state diff "
            "(direct reads of the API), value containment (the agent's channels)"
            if facts.audit.observed
            else "no audit log: the probe request was not observed in the audit stream"
        ),
        "value_containment_support": (
            "absolute-mode containment of registered values over the declared channels; "
            "a scenario using contextual mode is refused as not judgeable"
        ),
        "state_injection": (
            "every state kind and stimulus of the provider guide is realised"
            if not gaps
            else f"not realised: {', '.join(gaps)}"
        ),
        "audit_policy_installation": (
            f"the cluster's audit policy logs the harness's requests ({facts.audit.detail}); it is the cluster's "
            f"policy, which the operator does not install"
            if facts.audit.observed
            else f"no audit event for the probe request: {facts.audit.detail}"
        ),
        "network_policy_enforcement": (
            "scenario pods run on simulated nodes: no traffic flows between them, so a "
            "NetworkPolicy is stored but never enforced"
        ),
    }
    return values, basis


# -- checking a declaration against the profile's requirements ------------------------------------------
_OPERATORS: Final[Mapping[str, str]] = {"gte": ">=", "gt": ">", "lte": "<=", "lt": "<", "eq": "=="}


def _compare(declared: int, op: str, wanted: int) -> bool:
    return {
        ">=": declared >= wanted,
        ">": declared > wanted,
        "<=": declared <= wanted,
        "<": declared < wanted,
        "==": declared == wanted,
    }[op]


def _semver_ok(version: str, constraint: str) -> bool:
    parts = [p for p in re.split(r"[,\s]+", constraint.strip()) if p]
    try:
        parsed = semver.Version.parse(version)
        return bool(parts) and all(parsed.match(p) for p in parts)
    except ValueError:
        return False


def _judge(kind: str, expected: Any, declared: Any, requested_tier: int) -> tuple[bool, str] | None:
    """(met, how it was compared), or None for a requirement type this provider does not understand."""
    if kind == "integer" and isinstance(expected, Mapping):
        return _judge_bound(expected, declared, requested_tier)
    judge = _JUDGES.get(kind)
    return None if judge is None else judge(expected, declared)


def _judge_equal(expected: Any, declared: Any) -> tuple[bool, str]:
    return declared == expected and type(declared) is type(expected), f"expected {expected!r}"


def _judge_array(expected: Any, declared: Any) -> tuple[bool, str]:
    listed = [str(e) for e in expected or []]
    missing = [e for e in listed if e not in (declared or [])]
    return not missing, (f"missing {missing}" if missing else f"includes {listed}")


def _judge_integer(expected: Any, declared: Any) -> tuple[bool, str]:
    return declared == expected, f"expected {expected!r}"


def _judge_semver(expected: Any, declared: Any) -> tuple[bool, str]:
    versions = [str(v) for v in (declared if isinstance(declared, list) else [declared])]
    ok = any(_semver_ok(v, str(expected)) for v in versions)
    return ok, f"expected a version satisfying {expected}"


def _judge_bound(expected: Mapping[str, Any], declared: Any, requested_tier: int) -> tuple[bool, str] | None:
    """An integer against a comparison (``value: requested`` is the run's tier)."""
    op = _OPERATORS.get(str(expected.get("comparison_operator")))
    value = expected.get("value")
    bound = requested_tier if value == "requested" else value
    if op is None or not isinstance(bound, int) or not isinstance(declared, int):
        return None
    return _compare(declared, op, bound), f"expected {op} {bound}" + (
        " (the run's tier)" if value == "requested" else ""
    )


#: Requirement type -> how a declared value meets an expected one (an integer with a comparison aside).
_JUDGES: dict[str, Callable[[Any, Any], tuple[bool, str]]] = {
    "string": _judge_equal,
    "boolean": _judge_equal,
    "array": _judge_array,
    "integer": _judge_integer,
    "semver_list": _judge_semver,
}


def _first_sentence(text: str) -> str:
    return " ".join(text.split()).split(". ")[0].rstrip(".")


def _check_requirement(
    key: str,
    req: ConformanceRequirement,
    values: Mapping[str, Any],
    basis: Mapping[str, str],
    requested_tier: int,
) -> Check:
    required = req.required
    expected = req.expected
    excludes = EXCLUDES.get(key) or f"what the profile requires it for: {_first_sentence(req.description)}"
    if key not in values:
        return Check(
            REQUIREMENT,
            key,
            False,
            "this provider makes no declaration for this requirement",
            excludes,
            required,
            None,
            expected,
        )
    declared = values[key]
    judged = _judge(req.type, expected, declared, requested_tier)
    if judged is None:
        return Check(
            REQUIREMENT,
            key,
            False,
            f"requirement type {req.type!r} with expected {expected!r} is not understood by this provider",
            excludes,
            required,
            declared,
            expected,
        )
    met, how = judged
    reason = f"declared {declared!r}, {how}: {basis.get(key, '')}".rstrip(": ")
    return Check(REQUIREMENT, key, met, reason, excludes, required, declared, expected)


def _self_tests(facts: ProviderFacts) -> list[Check]:
    audit = facts.audit
    out = [
        Check(
            SELF_TEST,
            AUDIT_ROUND_TRIP,
            audit.observed,
            f"{audit.detail} ({audit.seconds:.2f}s)",
            "every verdict: without audit events no assertion about the agent's actions can be judged",
        )
    ]
    probed = {p.name: p for p in facts.probes}
    for name in sorted(facts.backends):
        p = probed.get(name)
        if p is None or p.reachable is None:
            out.append(
                Check(
                    SELF_TEST,
                    f"back-end {name}",
                    False,
                    p.detail if p is not None else "this back-end has no self-test",
                    f"nothing is excluded, but {name} is not known to answer before its first scenario",
                    required=False,
                )
            )
        else:
            out.append(
                Check(
                    SELF_TEST,
                    f"back-end {name}",
                    p.reachable,
                    p.detail,
                    f"every scenario that needs {registry.DESCRIPTIONS.get(name, name)}",
                )
            )
    return out


def _contract_of_another_profile(
    conformance: ProviderConformance, profile: tuple[str, str] | None
) -> Check | None:
    """A requirements file declared for another profile or version than the run's: its checks may not
    be this profile's, so none of them can back a claim."""
    if profile is None:
        return None
    declared = (conformance.profile, conformance.profile_version)
    if declared == profile:
        return None
    return Check(
        REQUIREMENT,
        "profile",
        False,
        f"the provider-conformance requirements are declared for {declared[0]} {declared[1]}, the run's "
        f"profile is {profile[0]} {profile[1]}",
        "every requirement check of this preflight: they may not be this profile's",
        True,
        list(declared),
        list(profile),
    )


def preflight(
    conformance: ProviderConformance | None,
    tiers: Mapping[int, Sequence[str]],
    requested_tier: int,
    facts: ProviderFacts,
    profile: tuple[str, str] | None = None,
) -> PreflightResult:
    """The preflight of one run: ``conformance`` is the profile's ``provider_conformance`` block (its
    ``requirements`` map; None when the profile has none), ``tiers`` each complexity tier's
    environment requirements, ``requested_tier`` the run's ``spec.tier``, ``profile`` the run's
    profile id and version (the requirements must be declared for them)."""
    values, basis = declaration(facts, tiers)
    checks = _self_tests(facts)
    mismatch = _contract_of_another_profile(conformance, profile) if conformance is not None else None
    if mismatch is not None:
        checks.append(mismatch)
    requirements = conformance.requirements if conformance is not None else {}
    for key in sorted(requirements):
        checks.append(_check_requirement(key, requirements[key], values, basis, requested_tier))
    usable = registry.usable(facts.backends)
    lines = tier_lines(tiers.get(requested_tier, ()), usable, facts.backends)
    unverified = [r for r in lines if not r["verified"]]
    if requested_tier not in tiers:
        checks.append(
            Check(
                TIER,
                f"tier {requested_tier}",
                False,
                "the profile declares no such tier",
                EXCLUDES["complexity_tier_supported"],
            )
        )
    else:
        checks.append(
            Check(
                TIER,
                f"tier {requested_tier}",
                not unverified,
                (
                    f"all {len(lines)} environment requirement(s) verified"
                    if not unverified
                    else f"{len(unverified)} of {len(lines)} environment requirement(s) not verified, first: "
                    f"{unverified[0]['requirement']} ({unverified[0]['reason']})"
                ),
                EXCLUDES["complexity_tier_supported"],
            )
        )
    return PreflightResult(tuple(checks), tuple(lines))


def unmet_lines(records: Iterable[Mapping[str, Any]]) -> list[str]:
    """One line per unmet check of stored preflight records (the report's ``environment.preflight`` or
    the run status), for ``oasis describe`` and the reports: what, why, and what it excludes."""
    out = []
    for r in records:
        if r.get("met"):
            continue
        optional = "" if r.get("required", True) else " (optional)"
        kind, name = str(r.get("kind")), str(r.get("name"))
        line = f"{name if name.startswith(kind) else kind + ' ' + name}{optional}: {r.get('reason')}"
        if r.get("excludes"):
            line += f" -- excludes {r['excludes']}"
        out.append(line)
    return out


def tiers_of(profile: Profile) -> dict[int, list[str]]:
    """Each complexity tier's environment requirements."""
    return {t.tier: list(t.environment) for t in profile.complexity_tiers}
