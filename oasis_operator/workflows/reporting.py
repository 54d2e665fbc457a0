"""A finished run's report: computed from the stored evidence, stored in every format the run asks
for, and what follows from it (the evidence dropped unless kept, the capability record, the terminal
status).

Called by :class:`~oasis_operator.workflows.run.RunDriver` once no scenario is left to run (and for a
finished run whose spec asks for new formats). The report is computed from what is stored, not from
memory: the sealed evidence read back, the scenarios as stored beside it (their secret values sealed,
decision 0054) and the run description (``run.json``), so that ``oasis evaluate --run-dir`` recomputes
it from an export byte for byte. It is stored first and the terminal status last: a restart in between
finds the stored report and takes it up from there.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from oasis_operator.core import reasons, yaml_text
from oasis_operator.core import run_status as rs
from oasis_operator.core.evidence.codec import read_lines
from oasis_operator.core.model.base import dump
from oasis_operator.core.model.profile import ComplexityTier, Profile
from oasis_operator.core.model.scenario import Scenario, parse_scenario
from oasis_operator.core.reporting import provenance
from oasis_operator.core.reporting.run_report import run_report
from oasis_operator.core.reporting.verdict_object import render_json
from oasis_operator.core.run_status import RunEvent
from oasis_operator.core.verdicts import NOT_EXECUTED_BY_PROVIDER, PASS
from oasis_operator.core.verification.sealing import seal_scenario
from oasis_operator.reports import FORMATS
from oasis_operator.workflows.run_context import Hold, RunContext

#: What the report is computed from besides the evidence, stored beside it (an export's run directory).
RUN_FILE = "run.json"
SCENARIOS_FILE = "scenarios.yaml"
#: ``metadata.environment.conformance_check`` of a run whose status holds no preflight record (one
#: prepared by an operator version before the preflight step).
PREFLIGHT_SUMMARY = (
    "audit stream live: a sentinel request reached the audit source before any scenario; "
    "the profile's provider-conformance requirements were not checked"
)


class Reporting:
    """Stores one run's report (:meth:`finish`)."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        #: Where the run directory's run.json and scenarios.yaml were stored with the report.
        self._replay_inputs: dict[str, list[str]] = {}

    async def finish(self) -> None:
        """Store the report (every format), then everything that follows from it, and the terminal
        status last: once a run reads finished, nothing of it is left to do (the operator stops
        looking at it). A restart in between finds the stored report and takes it up from there."""
        report, names = await self._stored_report()
        formats = await self.store_formats(report, names)
        verdict = rs.run_verdict(
            (report.get("verdict") or {}).get("safety"),
            aborted=bool(self.ctx.status.aborted),
            scenarios=self.ctx.status.entries,
        )
        keep_evidence = self._keeps_evidence()
        self.ctx.status.report = rs.ReportRecord(
            config_maps=names,
            incomplete=bool(report.get("incomplete")),
            formats=formats,
            evidence_kept=keep_evidence,
        )
        if self._replay_inputs:
            self.ctx.status.report.run_description = self._replay_inputs[RUN_FILE]
            self.ctx.status.report.scenario_documents = self._replay_inputs[SCENARIOS_FILE]
        await self.ctx.save(message="storing the report")  # still running: the report is recorded first
        if not keep_evidence:
            await self._drop_evidence()
        incomplete = bool(report.get("incomplete"))
        reason = self.ctx.status.transition(RunEvent.FINISHED, verdict=verdict, incomplete=incomplete)
        self.ctx.status.completion_time = self.ctx.now_str()
        self._record_capability(report)
        message = rs.completion_message(
            verdict,
            rs.summary(self.ctx.status.entries),
            aborted=bool(self.ctx.status.aborted),
            abort_reason=self.ctx.status.abort_reason or "",
            incomplete=incomplete,
        )
        await self.ctx.event(
            "Normal" if verdict == PASS and not incomplete else "Warning",
            reasons.EVENT_RUN_COMPLETED,
            message,
        )
        self.ctx.ports.metrics.run_finished(
            verdict,
            agent=(self.ctx.status.agent.name if self.ctx.status.agent else None) or "",
            profile=self.ctx.spec.profile_ref.name,
            incomplete=incomplete,
        )
        await self.ctx.save(reason=reason, message=message)

    async def _stored_report(self) -> tuple[dict[str, Any], list[str]]:
        """The JSON report: the one already stored (a restart after storing it), else built and stored."""
        stored = list((self.ctx.status.report.config_maps if self.ctx.status.report else None) or [])
        if stored:
            return json.loads(await self.ctx.ports.store.get_blob(self.ctx.ns, stored)), stored
        report, run_file, docs = await self._computed_report()
        # What the report was computed from first (an export's run.json and scenarios), the report last:
        # a restart before the report was stored computes and stores all three again.
        described = await self.ctx.ports.store.put_blob(
            self.ctx.run,
            "report",
            RUN_FILE,
            (json.dumps(run_file, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode(),
        )
        scenarios = await self.ctx.ports.store.put_blob(
            self.ctx.run, "report", SCENARIOS_FILE, yaml_text.dump_all(docs, sort_keys=False).encode()
        )
        names = await self.ctx.ports.store.put_blob(
            self.ctx.run, "report", FORMATS["json"].file_name, render_json(report).encode()
        )
        self._replay_inputs = {RUN_FILE: described, SCENARIOS_FILE: scenarios}
        return report, names

    async def _drop_evidence(self) -> None:
        """The report holds the deciding events; the raw evidence files go (report.includeEvidence keeps
        them, owned by the run, for `oasis evaluate` replays and audits)."""
        await self.ctx.ports.store.delete_blobs(self.ctx.run, "evidence")
        for s in self.ctx.status.entries:
            s.unset("evidence")

    def _record_capability(self, report: Mapping[str, Any]) -> None:
        cap = (report.get("verdict") or {}).get("capability") or {}
        if cap:
            self.ctx.status.capability = rs.CapabilityRecord(
                tier=cap.get("tier"),
                coverage_complete=bool((cap.get("coverage") or {}).get("complete")),
                dimensions={
                    k: (v.get("score") if isinstance(v, dict) else v)
                    for k, v in sorted((cap.get("core_dimensions") or {}).items())
                },
            )

    async def store_formats(self, report: dict[str, Any], json_parts: list[str]) -> dict[str, list[str]]:
        """Every format ``report.formats`` asks for, stored beside the JSON report (owned by the run)."""
        out = {"json": list(json_parts)}
        known = dict((self.ctx.status.report.formats if self.ctx.status.report else None) or {})
        for fmt in self.ctx.spec.report.formats if self.ctx.spec.report else ["json"]:
            if fmt in out:
                continue
            if known.get(fmt):
                out[fmt] = list(known[fmt])
                continue
            out[fmt] = await self.ctx.ports.store.put_blob(
                self.ctx.run, "report", FORMATS[fmt].file_name, FORMATS[fmt].render(report).encode()
            )
        return out

    async def build_report(self) -> dict[str, Any]:
        report, _, _ = await self._computed_report()
        return report

    async def _computed_report(self) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
        """The report, and what it was computed from besides the evidence: the run directory's
        ``run.json`` (the run description, the profile's scoring data, the scenario file's name) and
        the scenario documents, so that ``oasis evaluate --run-dir`` recomputes it from an export."""
        profile = self.ctx.profile or await self._profile_after_restart()
        executed = [s for s in self.ctx.status.entries if s.verdict not in NOT_EXECUTED_BY_PROVIDER]
        # The scenarios as stored beside the report: their declared secret values sealed (decision
        # 0054); the report reads them as a replay will (a sealed document is parsed on its own).
        docs: list[dict[str, Any]] = []
        scenarios: list[Scenario] = []
        texts: dict[str, str] = {}
        for s in executed:
            if s.name not in self.ctx.scenarios.docs:
                continue
            sealed = seal_scenario(self.ctx.scenarios.docs[s.name])
            scenario = (
                self.ctx.scenarios.scenario(s.name)
                if sealed == self.ctx.scenarios.docs[s.name]
                else parse_scenario(sealed)[0]
            )
            docs.append(sealed)
            scenarios.append(scenario)
            if s.evidence:
                texts[scenario.id] = (await self.ctx.ports.store.get_blob(self.ctx.ns, s.evidence)).decode()

        def evidence(sid: str) -> Any:
            text = texts.get(sid)
            return read_lines(text.splitlines()) if text else None

        run_doc = self.run_description(profile)
        scoring = profile.capability_scoring if profile is not None else None
        safety_cats = [c.id for c in profile.safety_scoring.categories] if profile is not None else []
        report = run_report(run_doc, scenarios, evidence, scoring, safety_cats)
        run_file = {
            **run_doc,
            "scenario_files": [SCENARIOS_FILE],
            "capability_scoring": dump(scoring) if scoring is not None else None,
            "safety_categories": safety_cats,
        }
        return report, run_file, docs

    async def _profile_after_restart(self) -> Profile | None:
        """The run's Profile read again (an operator restarted since the run was prepared); one gone or
        no longer valid leaves the report without capability scoring and safety categories."""
        held = await self.ctx.read_profile()
        return None if isinstance(held, Hold) else held

    def run_description(self, profile: Profile | None) -> dict[str, Any]:
        """Everything of the run the report is computed from besides scenarios and evidence (the
        ``run.json`` of an exported run directory): metadata, per-scenario non-scoring metadata and
        session ids, and the scenarios the provider did not execute."""
        agent = self.ctx.status.agent or rs.AgentRecord()
        # A status written before the declaration was kept has the version and declared model only.
        identity = dict(
            agent.identity
            or provenance.identity_declaration(
                {"version": agent.version, "declared_model": agent.declared_model}
            )
        )
        tiers = {t.tier: t for t in profile.complexity_tiers} if profile is not None else {}
        completed = self.ctx.now_str()
        # Wall time of each executed scenario (reports and JUnit show it; the verdict never reads it),
        # and its session: the ownership value its environment's objects carry (the join key from the
        # verdict to the audit log and the agent's own records of that scenario).
        non_scoring = {
            s.id: {"duration": s.duration_seconds}
            for s in self.ctx.status.entries
            if s.duration_seconds is not None
        }
        sessions = {s.id: s.owner for s in self.ctx.status.entries if s.owner}
        unsupported = [
            {
                "scenario_id": s.id,
                "reason": s.reason,
                "result": s.verdict,
                "classification": s.classification,
                "category": s.category,
            }
            for s in self.ctx.status.entries
            if s.verdict in NOT_EXECUTED_BY_PROVIDER
        ]
        return {
            "agent": agent.name,
            "agent_version": agent.version,
            "agent_identity": identity,
            "agent_configuration": agent.configuration or {},
            "domain_profile": profile.id if profile is not None else None,
            "domain_profile_version": profile.version if profile is not None else None,
            "oasis_core_version": provenance.OASIS_CORE_VERSION,
            "evaluation_implementation": provenance.evaluation_implementation(),
            "environment": self._environment(tiers),
            "tier": self.ctx.spec.tier,
            "timestamp": self.ctx.status.start_time,
            "duration": provenance.iso_duration(self.ctx.status.start_time or "", completed),
            "evaluator": "oasis-operator",
            "aborted": bool(self.ctx.status.aborted),
            "abort_reason": self.ctx.status.abort_reason or "",
            "non_scoring_metadata": non_scoring,
            "session_ids": sessions,
            "not_executed_by_provider": unsupported,
            # Whether the evidence files outlive the report: a record names its file only then.
            "evidence_retained": self._keeps_evidence(),
        }

    def _keeps_evidence(self) -> bool:
        return bool(self.ctx.spec.report and self.ctx.spec.report.include_evidence)

    def _environment(self, tiers: Mapping[int, ComplexityTier]) -> dict[str, Any]:
        """``metadata.environment``: with the preflight's checks and tier evidence when it ran."""
        pf = self.ctx.status.preflight
        tier = tiers.get(self.ctx.spec.tier)
        lines = list(tier.environment) if tier is not None else []
        if pf is None or pf.checks is None:
            return provenance.environment_description(
                tier=self.ctx.spec.tier, tier_requirements=lines, conformance_check=PREFLIGHT_SUMMARY
            )
        return provenance.environment_description(
            tier=self.ctx.spec.tier,
            tier_requirements=lines,
            conformance_check=pf.summary or PREFLIGHT_SUMMARY,
            preflight=pf.checks,
            tier_checked=pf.tier_requirements,
            tier_evidence=pf.tier_evidence,
        )
