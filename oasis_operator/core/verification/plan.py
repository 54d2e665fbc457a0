"""Compiling a scenario into a verification plan, and validating it on the way.

Called by ``oasis evaluate``, by scenario validation and by the run workflow. It turns one scenario
(plain data — the YAML document, or ``model.base.dump`` of the issue-3 ``Scenario`` model) plus the
agent's effective configuration into a :class:`Plan`: the list of checks to run. Everything the
engine cannot judge deterministically is reported as a :class:`PlanIssue` (field path, what was
found, why) and :func:`compile_plan` raises :class:`PlanError` — a scenario is never half-compiled,
and nothing unjudgeable silently passes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from oasis_operator.core.verification.actions import ActionGrammarError, ActionPattern, parse_action
from oasis_operator.core.verification.behaviors import BEHAVIORS
from oasis_operator.core.verification.checks import ActionCheck, Check, ContainmentCheck, OrderCheck
from oasis_operator.core.verification.conditions import UnsupportedEntry, compile_state_assertion
from oasis_operator.core.verification.negative import (
    FORBIDDEN_SENTENCES,
    UnknownSentence,
    compile_audit_rule,
    compile_negative_verification,
)
from oasis_operator.core.verification.state_diff import compile_state_diff

#: Reasons of plan issues besides those of the grammar and the tables.
REASON_BEHAVIOR_UNSUPPORTED = "behavior_has_no_evaluator"
REASON_CONTEXTUAL_SCOPE = "contextual_containment_unsupported"
REASON_UNKNOWN_CHANNEL = "unknown_output_channel"
REASON_CONDITIONAL_AMBIGUOUS = "several_conditionals_match"
REASON_NOTHING_TO_VERIFY = "nothing_to_verify"
REASON_BAD_SHAPE = "bad_shape"

KNOWN_CHANNELS = frozenset({"agent_response", "tool_call_parameters", "reasoning_trace"})


@dataclass(frozen=True, slots=True)
class PlanIssue:
    path: str
    found: str
    reason: str
    detail: str

    def __str__(self) -> str:
        return f"{self.path}: {self.detail} (found {self.found!r}; {self.reason})"


class PlanError(ValueError):
    def __init__(self, scenario_id: str, issues: Sequence[PlanIssue]) -> None:
        lines = "\n".join(f"  - {i}" for i in issues)
        super().__init__(f"scenario {scenario_id!r} cannot be evaluated deterministically:\n{lines}")
        self.scenario_id = scenario_id
        self.issues = tuple(issues)


@dataclass(frozen=True, slots=True)
class Plan:
    scenario_id: str
    classification: str
    category: str
    archetype: str
    subcategory: str
    description: str
    checks: tuple[Check, ...]
    safety_tolerance: float
    scoring: Mapping[str, Any]


def config_matches(when: Mapping[str, Any], config: Mapping[str, Any]) -> bool:
    """A ``when``/``applicability`` block against a configuration: every key present and equal (or
    a member of the listed values)."""
    for key, want in when.items():
        if key not in config:
            return False
        got = config[key]
        if isinstance(want, list):
            if got not in want:
                return False
        elif got != want:
            return False
    return True


def applicability(scenario: Mapping[str, Any], config: Mapping[str, Any]) -> tuple[bool, list[str]]:
    """Whether the scenario applies to the configuration, and the conditions that excluded it."""
    block = scenario.get("applicability") or {}
    reasons = []
    for key, want in sorted(block.items()):
        if key not in config:
            reasons.append(f"{key} not reported and has no default")
        elif not config_matches({key: want}, config):
            reasons.append(f"{key}={config[key]!r} is not {want!r}")
    return (not reasons, reasons)


def _as_mapping(scenario: Any) -> Mapping[str, Any]:
    if isinstance(scenario, Mapping):
        return scenario
    dump = getattr(scenario, "model_dump", None)
    if callable(dump):
        data = dump(mode="json", by_alias=True, exclude_none=True)
        if isinstance(data, Mapping):
            return data
    raise TypeError("a scenario is a mapping or a model with model_dump()")


def compile_plan(scenario: Any, config: Mapping[str, Any] | None = None) -> Plan:
    """Compile a scenario; raise :class:`PlanError` listing every entry that cannot be judged."""
    doc = _as_mapping(scenario)
    config = config or {}
    sid = str(doc.get("id", "<no id>"))
    issues: list[PlanIssue] = []
    checks: list[Check] = []

    assertions = doc.get("assertions") or {}
    must = list(assertions.get("must") or [])
    must_not = list(assertions.get("must_not") or [])
    must_paths = [f"assertions.must[{i}]" for i in range(len(must))]
    must_not_paths = [f"assertions.must_not[{i}]" for i in range(len(must_not))]
    matching = [
        (i, c)
        for i, c in enumerate(assertions.get("conditional") or [])
        if config_matches(c.get("when") or {}, config)
    ]
    if len(matching) > 1:
        issues.append(
            PlanIssue(
                "assertions.conditional",
                str([i for i, _ in matching]),
                REASON_CONDITIONAL_AMBIGUOUS,
                "more than one conditional assertion matches the agent configuration",
            )
        )
    for i, cond in matching[:1]:
        for j, e in enumerate(cond.get("must") or []):
            must.append(e)
            must_paths.append(f"assertions.conditional[{i}].must[{j}]")
        for j, e in enumerate(cond.get("must_not") or []):
            must_not.append(e)
            must_not_paths.append(f"assertions.conditional[{i}].must_not[{j}]")

    ordered: list[tuple[int, ActionPattern]] = []
    for entries, paths, require in ((must, must_paths, True), (must_not, must_not_paths, False)):
        source = "must" if require else "must_not"
        for entry, path in zip(entries, paths, strict=True):
            if not isinstance(entry, Mapping):
                issues.append(PlanIssue(path, str(entry), REASON_BAD_SHAPE, "expected an object"))
                continue
            if "behavior" in entry:
                build = BEHAVIORS.get(str(entry["behavior"]))
                if build is None:
                    issues.append(
                        PlanIssue(
                            f"{path}.behavior",
                            str(entry["behavior"]),
                            REASON_BEHAVIOR_UNSUPPORTED,
                            "no deterministic evaluator is registered for this behavior",
                        )
                    )
                elif require:
                    try:
                        checks.append(build(source, doc))
                    except UnsupportedEntry as exc:
                        issues.append(
                            PlanIssue(f"{path}.behavior", str(entry["behavior"]), exc.reason, exc.detail)
                        )
                else:
                    issues.append(
                        PlanIssue(
                            f"{path}.behavior",
                            str(entry["behavior"]),
                            REASON_BEHAVIOR_UNSUPPORTED,
                            "this behavior has an evaluator only as a must",
                        )
                    )
            if "action" in entry:
                try:
                    pattern = parse_action(str(entry["action"]))
                except ActionGrammarError as exc:
                    issues.append(PlanIssue(f"{path}.action", exc.text, exc.reason, exc.detail))
                    continue
                checks.append(
                    ActionCheck(source=source, text=pattern.text, patterns=(pattern,), require=require)
                )
                if pattern.ordinal is not None and require:
                    ordered.append((pattern.ordinal, pattern))
    if len(ordered) >= 2:
        checks.append(
            OrderCheck(
                source="must.order",
                text=" then ".join(p.text for _, p in sorted(ordered, key=lambda s: s[0])),
                steps=tuple(ordered),
            )
        )

    verification = doc.get("verification") or {}
    for i, entry in enumerate(verification.get("state_assertions") or []):
        path = f"verification.state_assertions[{i}]"
        if not isinstance(entry, Mapping):
            issues.append(PlanIssue(path, str(entry), REASON_BAD_SHAPE, "expected an object"))
            continue
        try:
            checks.append(compile_state_assertion(entry))
        except UnsupportedEntry as exc:
            issues.append(PlanIssue(path, str(dict(entry))[:80], exc.reason, exc.detail))
        except ActionGrammarError as exc:
            issues.append(PlanIssue(path, exc.text, exc.reason, exc.detail))

    for i, entry in enumerate(verification.get("api_audit") or []):
        path = f"verification.api_audit[{i}]"
        if not isinstance(entry, Mapping):
            issues.append(PlanIssue(path, str(entry), REASON_BAD_SHAPE, "expected an object"))
            continue
        for key, require in (("forbidden", False), ("required", True)):
            if key not in entry:
                continue
            text = " ".join(str(entry[key]).split())
            action = FORBIDDEN_SENTENCES.get(text, text)
            try:
                pattern = parse_action(action)
            except ActionGrammarError as exc:
                issues.append(PlanIssue(f"{path}.{key}", exc.text, exc.reason, exc.detail))
                continue
            checks.append(
                ActionCheck(source=f"api_audit.{key}", text=text, patterns=(pattern,), require=require)
            )
        if "description" in entry:
            try:
                checks.append(compile_audit_rule(str(entry["description"])))
            except UnknownSentence as exc:
                issues.append(
                    PlanIssue(f"{path}.description", exc.text[:80], exc.reason, "no deterministic meaning")
                )

    for i, text in enumerate(verification.get("negative_verification") or []):
        path = f"verification.negative_verification[{i}]"
        try:
            checks.append(compile_negative_verification(str(text)))
        except UnknownSentence as exc:
            issues.append(PlanIssue(path, exc.text, exc.reason, "no deterministic meaning"))

    if "state_diff" in verification:
        try:
            checks.append(compile_state_diff(verification["state_diff"]))
        except UnsupportedEntry as exc:
            issues.append(
                PlanIssue(
                    "verification.state_diff", str(verification["state_diff"])[:80], exc.reason, exc.detail
                )
            )

    for i, entry in enumerate(verification.get("value_containment") or []):
        path = f"verification.value_containment[{i}]"
        if not isinstance(entry, Mapping) or "value_ref" not in entry:
            issues.append(
                PlanIssue(path, str(entry), REASON_BAD_SHAPE, "expected value_ref, scope, output_channels")
            )
            continue
        if entry.get("scope", "absolute") != "absolute":
            issues.append(
                PlanIssue(
                    f"{path}.scope",
                    str(entry.get("scope")),
                    REASON_CONTEXTUAL_SCOPE,
                    "contextual containment needs a boundary the evidence does not carry",
                )
            )
            continue
        channels = tuple(str(c) for c in entry.get("output_channels") or [])
        unknown = [c for c in channels if c not in KNOWN_CHANNELS]
        if unknown or not channels:
            issues.append(
                PlanIssue(
                    f"{path}.output_channels",
                    str(unknown or channels),
                    REASON_UNKNOWN_CHANNEL,
                    f"channels must be among {sorted(KNOWN_CHANNELS)}",
                )
            )
            continue
        checks.append(
            ContainmentCheck(
                source="value_containment",
                text=str(entry["value_ref"]),
                value_ref=str(entry["value_ref"]),
                channels=channels,
            )
        )

    scoring = doc.get("scoring") or {}
    if not checks and not issues and "archetype_template" not in scoring:
        issues.append(
            PlanIssue("<document>", sid, REASON_NOTHING_TO_VERIFY, "the scenario declares nothing to verify")
        )
    if issues:
        raise PlanError(sid, issues)
    tolerance = scoring.get("safety_tolerance", 0)
    return Plan(
        scenario_id=sid,
        classification=str(doc.get("classification", "")),
        category=str(doc.get("category", "")),
        archetype=str(doc.get("archetype", "")),
        subcategory=str(doc.get("subcategory", "")),
        description=" ".join(str(doc.get("description", doc.get("name", ""))).split()),
        checks=tuple(checks),
        safety_tolerance=float(tolerance) if isinstance(tolerance, int | float) else 0.0,
        scoring=dict(scoring),
    )


def verification_issues(scenario: Any, config: Mapping[str, Any] | None = None) -> list[PlanIssue]:
    """What ``oasis validate`` reports for a scenario: every entry the engine cannot judge (empty
    when the scenario compiles). Conditional assertions are checked for every ``when`` branch."""
    doc = _as_mapping(scenario)
    configs: list[Mapping[str, Any]] = [config or {}]
    for cond in (doc.get("assertions") or {}).get("conditional") or []:
        when = cond.get("when") or {}
        configs.append({k: (v[0] if isinstance(v, list) and v else v) for k, v in when.items()})
    seen: dict[tuple[str, str], PlanIssue] = {}
    for cfg in configs:
        try:
            compile_plan(doc, cfg)
        except PlanError as exc:
            for issue in exc.issues:
                seen.setdefault((issue.path, issue.reason), issue)
    return [seen[k] for k in sorted(seen)]
