"""One incomplete PASS, every surface (decision 0105): the run an opted-in incomplete evaluation really
produces (driven on the in-memory fakes: its status and its stored report) read by the conditions,
``oasis wait``'s exit code, kstatus (its own library), Argo CD's health check (the Lua, in Lua 5.1),
Flux's expressions (cel-go), the JUnit report and the HTML report. Each says the same thing: the gate
stays shut, no conformance claim. The control is the same run made complete (phase Succeeded, a
complete report): every surface opens, so none of them is shut by accident."""

from __future__ import annotations

import json
from typing import Any

from oasis_operator.cli.wait import EXIT_INCOMPLETE, EXIT_PASS, exit_code
from oasis_operator.core import reasons
from oasis_operator.core import run_status as rs
from oasis_operator.core.run_status import Phase
from oasis_operator.reports.html import render_html
from oasis_operator.reports.junit import render_junit
from oasis_operator.reports.schema import report_problems
from tests.shipping import test_argocd_health as argo
from tests.shipping import test_flux_health as flux
from tests.shipping.test_kstatus import ARGO_GATE, FLUX_GATE, KSTATUS_GATE
from tests.workflows.world import CASCADING, DESTRUCTION, NS, World

OPEN, SHUT = "open", "shut"


async def incomplete_pass() -> tuple[dict[str, Any], dict[str, Any]]:
    """The run object and report of a real incomplete PASS: the SI profile on the fakes, whose
    provider misses requirements, with ``spec.incomplete: true``."""
    w = World()
    w.install(only=[DESTRUCTION, CASCADING])
    w.submit(incomplete=True)
    assert await w.drive() == "finished"
    run = await w.store.get_run(NS, "run")
    assert run is not None
    report: dict[str, Any] = json.loads(await w.store.get_blob(NS, run["status"]["report"]["configMaps"]))
    return run, report


def completed(run: dict[str, Any], report: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The control: the same run as a complete PASS would read (Succeeded, a complete report)."""
    status = dict(run["status"])
    status["phase"] = Phase.SUCCEEDED.value
    status["report"] = {**status["report"], "incomplete": False}
    status["conditions"] = rs.conditions(
        phase=Phase.SUCCEEDED,
        verdict="PASS",
        reason=reasons.PASSED,
        message="PASS",
        generation=int(status["observedGeneration"]),
        now="2026-12-01T12:00:00Z",
    )
    return {**run, "status": status}, {**report, "incomplete": False, "conformance_claim": {"claimed": True}}


def surfaces(run: dict[str, Any], report: dict[str, Any], kstatus: Any) -> dict[str, str]:
    """What each surface lets a gate do with this run: open or shut."""
    status = run["status"]
    conds = {c["type"]: c["status"] for c in status["conditions"]}
    junit = render_junit(report)
    html = render_html(report)
    (k,) = kstatus([run])
    (f,) = flux.evaluate(flux.fluxcel_binary(), [run])
    return {
        "conditions": OPEN if conds["Succeeded"] == "True" and conds["Stalled"] == "False" else SHUT,
        "oasis wait": OPEN if exit_code(status) == EXIT_PASS else SHUT,
        "kstatus": KSTATUS_GATE[k["status"]],
        "argocd": ARGO_GATE[argo.health(run)[0]],
        "flux": FLUX_GATE[f],
        "junit": OPEN if 'failures="0"' in junit.split("\n")[1] else SHUT,
        "html": SHUT if "No conformance claim" in html else OPEN,
    }


async def test_an_incomplete_pass_reads_the_same_on_every_surface_and_opens_no_gate(kstatus) -> None:
    run, report = await incomplete_pass()
    status = run["status"]
    # What the run is: a PASS of what ran, labelled incomplete, no claim.
    assert (status["verdict"], status["phase"]) == ("PASS", Phase.INCOMPLETE)
    assert report["incomplete"] is True
    assert "conformance_claim" not in report
    assert report["verdict"]["safety"] == "PASS"
    assert report_problems(report) == []
    assert exit_code(status) == EXIT_INCOMPLETE
    stalled = next(c for c in status["conditions"] if c["type"] == "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", reasons.INCOMPLETE)
    assert "incomplete evaluation" in argo.health(run)[1]

    assert surfaces(run, report, kstatus) == dict.fromkeys(
        ("conditions", "oasis wait", "kstatus", "argocd", "flux", "junit", "html"), SHUT
    )
    # The control: the same run, complete, opens every one of them.
    assert surfaces(*completed(run, report), kstatus) == dict.fromkeys(
        ("conditions", "oasis wait", "kstatus", "argocd", "flux", "junit", "html"), OPEN
    )
