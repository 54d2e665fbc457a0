"""Preparing a run: what it evaluates, who the agent is, whether the provider can vouch for the
evidence, and which scenarios can run.

Called by :class:`~oasis_operator.workflows.run.RunDriver` before a run has any scenario in its status;
a chain whose first :class:`~oasis_operator.workflows.run_context.Hold` wins: the Profile (parsed once,
waited for while it does not exist or validate), the scenarios it selects (every member of its suite,
or at least one for its selector), the agent's identity, the preflight (decision 0057: a broken evidence
path ends the run; decision 0105: unmet requirements end it too, no verdict file, unless the spec opts in
to an incomplete evaluation, which goes on without a conformance claim),
then each scenario parsed once and triaged (:mod:`oasis_operator.core.triage`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from oasis_operator.core import reasons
from oasis_operator.core import run_status as rs
from oasis_operator.core.contract.agent import IdentityAndConfiguration
from oasis_operator.core.environment.naming import owner_value
from oasis_operator.core.errors import AdapterNotAllowed, AgentUnavailable, TargetUnavailable
from oasis_operator.core.model.errors import ModelValidationError
from oasis_operator.core.model.profile import Profile
from oasis_operator.core.preflight import unmet_lines
from oasis_operator.core.reporting import provenance
from oasis_operator.core.run_status import RunEvent, ScenarioEntry, ScenarioEvent, Step
from oasis_operator.core.triage import triage, unreadable
from oasis_operator.workflows.preflight import run_preflight
from oasis_operator.workflows.run_context import Hold, RunContext, waiting

log = logging.getLogger("oasis.run")


class Preparation:
    """Prepares one run (:meth:`prepare`)."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        #: The preflight's unmet checks, one line each (announced once the run has started).
        self._unmet: list[str] = []

    async def prepare(self) -> Hold | None:
        """Resolve what the run needs, ask the agent who it is, preflight, and plan every scenario: a
        chain, the first :class:`Hold` wins."""
        profile = await self.ctx.read_profile()
        if isinstance(profile, Hold):
            return profile
        selected = await self._select(profile)
        if isinstance(selected, Hold):
            return selected
        identity = await self._identify()
        if isinstance(identity, Hold):
            return identity
        hold = await self._preflight(profile)
        if hold is not None:
            return hold
        await self._plan_scenarios(profile, selected, identity)
        if self._unmet:  # announced after RunStarted: the run goes on without a conformance claim
            await self.ctx.event(
                "Warning",
                reasons.REQUIREMENTS_UNMET,
                reasons.clip("preflight: " + "; ".join(self._unmet), reasons.MESSAGE_LIMIT),
            )
        return None

    async def _select(self, profile: Profile) -> list[dict[str, Any]] | Hold:
        """The Scenario objects the run evaluates: the profile's suite in its order (every member must
        exist, else the run waits), or every Scenario matching the selector (at least one)."""
        selection = self.ctx.spec.scenarios
        objs = await self.ctx.ports.store.list_scenarios(self.ctx.ns, selection.selector)
        if selection.suite:
            suite = next((s for s in profile.suites or () if selection.suite in (s.id, s.name)), None)
            if suite is None:
                return waiting(
                    reasons.SCENARIOS_NOT_FOUND,
                    f"Profile {self.ctx.spec.profile_ref.name} has no suite {selection.suite} yet",
                )
            ids = list(suite.scenarios)
            by_id = {str(o["spec"].get("id")): o for o in objs}
            # With a selector too: the suite's members that also match it; every member must exist.
            every = (
                {str(o["spec"].get("id")) for o in await self.ctx.ports.store.list_scenarios(self.ctx.ns)}
                if selection.selector is not None
                else set(by_id)
            )
            missing = [i for i in ids if i not in every]
            if missing:
                shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
                return waiting(
                    reasons.SCENARIOS_NOT_FOUND,
                    f"suite {selection.suite}: {len(missing)} of "
                    f"{len(ids)} Scenarios do not exist in {self.ctx.ns} yet: {shown}",
                )
            objs = [by_id[i] for i in ids if i in by_id]
        else:
            objs.sort(key=lambda o: str(o["spec"].get("id")))
        if not objs:
            return waiting(
                reasons.SCENARIOS_NOT_FOUND, f"no Scenario in {self.ctx.ns} matches the run's selection yet"
            )
        return objs

    async def _identify(self) -> IdentityAndConfiguration | Hold:
        try:
            return await (await self.ctx.agent_port()).identify()
        except AdapterNotAllowed as exc:
            return Hold(RunEvent.ADAPTER_REFUSED, reasons.ADAPTER_NOT_ALLOWED, str(exc))
        except (AgentUnavailable, ValueError, LookupError) as exc:
            # Not there yet (a Deployment still starting, a Secret not applied yet): ask again later.
            self.ctx.forget_agent()
            return waiting(reasons.AGENT_NOT_READY, f"agent identity: {exc}")

    async def _preflight(self, profile: Profile) -> Hold | None:
        """The named step before the first scenario (decision 0057): the evidence path's self-tests and
        the provider checked against the profile's requirements and the run's tier. A broken evidence
        path ends the run without a verdict; so do unmet requirements (decision 0105), unless
        ``spec.incomplete`` opts in: then they are recorded and the run goes on (its report is
        incomplete and claims nothing), as it does for an unbacked tier. It runs where the scenarios will: in a target of its
        own when scenarios run in targets (decision 0100)."""
        clusters = self.ctx.ports.scenario_clusters()
        owner = owner_value(self.ctx.run["metadata"]["uid"], "preflight")
        try:
            cluster = await clusters.lease(owner)
        except TargetUnavailable as exc:
            return Hold(
                RunEvent.PREFLIGHT_FAILED,
                reasons.PREFLIGHT_FAILED,
                f"preflight: no target control plane: {exc}",
            )
        try:
            done = await run_preflight(
                audit=cluster.audit,
                send_sentinel=cluster.send_sentinel,
                toolplane=cluster.toolplane,
                profile=profile,
                tier=self.ctx.spec.tier,
                timeout=self.ctx.ports.barrier_timeout,
            )
        finally:
            await clusters.release(owner)
        result = done.result
        outcome = (
            reasons.PREFLIGHT_FAILED
            if result.ends_run
            else reasons.REQUIREMENTS_UNMET
            if result.unmet
            else reasons.PREFLIGHT_PASSED
        )
        self.ctx.status.preflight = rs.PreflightRecord(
            outcome=outcome,
            summary=reasons.clip(result.summary(), reasons.MESSAGE_LIMIT),
            seconds=round(done.seconds, 3),
            checks=result.records(),
            tier_requirements=[dict(r) for r in result.tier_requirements],
            tier_evidence=result.tier_evidence(self.ctx.spec.tier),
        )
        self._unmet = unmet_lines(c.record() for c in result.unmet)
        log.info("run %s/%s: preflight %s in %.3fs", self.ctx.ns, self.ctx.name, outcome, done.seconds)
        if result.ends_run:
            broken = "; ".join(f"{c.name}: {c.reason}" for c in result.failed_self_tests)
            return Hold(
                RunEvent.PREFLIGHT_FAILED,
                reasons.PREFLIGHT_FAILED,
                f"preflight: evidence path broken: {broken}",
            )
        if result.blocking and not self.ctx.spec.incomplete:
            gaps = "; ".join(f"{c.name}: {c.reason}" for c in result.blocking)
            return Hold(
                RunEvent.REQUIREMENTS_UNMET,
                reasons.REQUIREMENTS_UNMET,
                f"preflight: provider requirements unmet, the run did not start (no verdict file; "
                f"spec.incomplete: true runs it as an incomplete evaluation): {gaps}",
            )
        return None

    async def _plan_scenarios(
        self, profile: Profile, selected: list[dict[str, Any]], ident: IdentityAndConfiguration
    ) -> None:
        configuration = dict(ident.configuration)
        self.ctx.status.agent = rs.AgentRecord(
            name=ident.identity.name,
            version=ident.identity.version,
            declared_model=ident.identity.declared_model or "",
            configuration=configuration,
            identity=provenance.identity_declaration(ident.identity.model_dump()),
        )
        entries = [self._triaged(obj, configuration) for obj in selected]
        self.ctx.status.scenarios = entries
        self.ctx.status.profile = rs.ProfileRecord(
            name=self.ctx.spec.profile_ref.name, id=profile.id, version=profile.version
        )
        reason = self.ctx.status.transition(RunEvent.PREPARED)
        runnable = sum(1 for e in entries if e.step is Step.PENDING)
        await self.ctx.save(reason=reason, message=f"{runnable} of {len(entries)} scenarios to run")
        await self.ctx.event(
            "Normal",
            reasons.EVENT_RUN_STARTED,
            f"agent {ident.identity.name} {ident.identity.version}: "
            f"{runnable} of {len(entries)} scenarios to run",
        )

    def _triaged(self, obj: Mapping[str, Any], configuration: Mapping[str, Any]) -> ScenarioEntry:
        doc = obj["spec"]
        name = obj["metadata"]["name"]
        self.ctx.scenarios.put(name, doc)
        entry = ScenarioEntry(name=name, id=doc.get("id"), step=Step.PENDING, attempt=0)
        try:
            scenario = self.ctx.scenarios.scenario(name)
        except ModelValidationError as exc:  # the model refuses it: never run
            entry.category, entry.classification = doc.get("category"), doc.get("classification")
            decided = unreadable(str(exc))
        else:
            entry.category, entry.classification = scenario.category, scenario.classification
            decided = triage(
                scenario,
                configuration,
                cluster_scoped=self.ctx.ports.cluster_scoped,
                backends=self.ctx.ports.backends,
            )
        if decided.exclusion is not None:
            entry.advance(ScenarioEvent.EXCLUDED, verdict=decided.exclusion, reason=decided.reason)
        if decided.exclusive is not None:
            entry.exclusive = decided.exclusive
        return entry
