"""The adversarial campaign: every row of the red-team table, run live through the operator.

Used by ``conftest.py`` (the ``campaign`` fixture). It imports the SI profile and the suite's own
scenarios into a namespace of the session control plane, each Scenario labelled with its id; starts
the red-team persona and an operator watching that namespace (with the session cluster's tool plane);
groups the rows' runs (a technique's
violating attempt or its benign twin) into *waves* — one EvaluationRun per wave, each scenario at most
once per wave, the persona's endpoint path naming which row it plays for which scenario — applies the
waves a few at a time, and collects, per row, the scenario's status entry, the stored report's
evaluation of it and the persona's journal. Nothing is judged here; the tests judge.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import httpx2
import yaml

from oasis_operator.agents.reference.redteam.scenes import NODE_LABEL_PREFIX
from oasis_operator.agents.reference.redteam.server import plan_path
from oasis_operator.agents.reference.redteam.techniques import (
    FAIL,
    GROUPS,
    PASS,
    PLANT_MARK,
    RESIDUAL,
    Evidence,
    Item,
    items,
    plant_marker,
)
from oasis_operator.core import stored_parts
from oasis_operator.core.model.errors import ModelValidationError
from oasis_operator.core.model.manifest import scenario_manifest
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.devcluster import kube, stack
from oasis_operator.loading.profile_dir import import_profile, manifests

HERE = Path(__file__).resolve().parent
OWN_DIR = HERE / "scenarios"
#: The label each imported Scenario carries: its id, so one run can select exactly the scenarios of a wave.
SCENARIO_LABEL = "redteam.example/scenario"
#: The class-13 techniques label a shared node ``<prefix><their namespace>`` (labels with this prefix are
#: removed after the campaign whatever happens).
NODE_LABEL = NODE_LABEL_PREFIX
#: At most this many EvaluationRuns in flight at once (each runs up to PARALLELISM scenarios).
MAX_RUNS_IN_FLIGHT = int(os.environ.get("OASIS_ADVERSARIAL_RUNS_IN_FLIGHT", "3"))
PARALLELISM = 8
RUN_TIMEOUT = 240.0
#: Rounds of runs: a later round re-runs what a run's abort (a provider fault) kept from running.
ROUNDS = 3
PROFILE = "oasis-profile-software-infrastructure"
#: How long to wait for the persona's delayed actors to report after the last run.
AFTER_ANSWER_WAIT = 10.0
API = "/apis/oasis.dev/v1alpha1"
#: A directory: when set, every run keeps its evidence (``report.includeEvidence``) and the campaign
#: copies each scenario's bundle to ``<dir>/<run>/evidence-<scenario id>.json`` (for ``oasis evaluate``).
KEEP_EVIDENCE = (
    Path(os.environ["OASIS_ADVERSARIAL_KEEP_EVIDENCE"])
    if os.environ.get("OASIS_ADVERSARIAL_KEEP_EVIDENCE")
    else None
)


def own_scenario_files() -> dict[str, Path]:
    """Scenario id -> file of the suite's own scenarios."""
    out = {}
    for path in sorted(OWN_DIR.glob("*.yaml")):
        out[str(yaml.safe_load(path.read_text())["id"])] = path
    return out


def waves(chosen: Iterable[Item]) -> list[tuple[str, list[Item]]]:
    """Group items into runs: same run group, each scenario at most once per run (first fit); a row
    of a group marked ``alone`` gets a run to itself."""
    out: list[tuple[str, list[Item]]] = []
    for item in chosen:
        group = item.technique.group
        for g, members in out:
            if GROUPS[g].get("alone"):
                continue
            if g == group and all(m.technique.scenario != item.technique.scenario for m in members):
                members.append(item)
                break
        else:
            out.append((group, [item]))
    return out


@dataclass
class Outcome:
    """What became of one row's run."""

    item: Item
    run: str = ""
    status: dict[str, Any] = field(default_factory=dict)  # the run's status entry for the scenario
    result: dict[str, Any] = field(default_factory=dict)  # the report's evaluation of the scenario
    journal: list[dict[str, Any]] = field(default_factory=list)
    refused: str = ""  # the scenario was refused at validation (before any run): why
    #: Earlier runs of this row the persona never played (no journal entry), each summarised; the row
    #: went again in the next round. Shown in results.json so a recurring cause is not lost.
    earlier: list[dict[str, Any]] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        if self.refused:
            return "INVALID"
        return str(self.status.get("verdict") or f"(none: step {self.status.get('step')})")

    @property
    def reason(self) -> str:
        return self.refused or str(self.status.get("reason") or "")

    def violated(self) -> list[dict[str, Any]]:
        return [a for a in self.result.get("assertions") or [] if a.get("outcome") == "violated"]


@dataclass
class Campaign:
    namespace: str
    outcomes: dict[str, Outcome]
    nodes_before: dict[str, dict[str, str]]
    nodes_after: dict[str, dict[str, str]]
    timings: dict[str, float]
    runs: dict[str, dict[str, Any]]
    log_dir: Path
    #: What the database rows' plants left: the payload's lines in the server's log, and the namespaces
    #: whose marker file (the payload's shell command) existed after the runs.
    plant_lines: list[str] = field(default_factory=list)
    plant_markers: set[str] = field(default_factory=set)


def _label(doc: dict[str, Any]) -> dict[str, Any]:
    doc["metadata"].setdefault("labels", {})[SCENARIO_LABEL] = doc["spec"]["id"]
    return doc


def import_scenarios(http: httpx2.Client, namespace: str) -> dict[str, str]:
    """Apply the SI profile and the own scenarios, labelled; returns own scenario id -> refusal."""
    docs = manifests(import_profile(stack.SI_PROFILE_DIR))
    profile_id = docs[0]["spec"]["id"]
    refused: dict[str, str] = {}
    for doc in docs:
        stack.apply(http, _label(doc) if doc["kind"] == "Scenario" else doc, namespace)
    for sid, path in own_scenario_files().items():
        try:
            scenario, _ = parse_scenario(yaml.safe_load(path.read_text()))
        except ModelValidationError as exc:
            refused[sid] = f"refused at validation: {exc}"
            continue
        stack.apply(http, _label(scenario_manifest(scenario, profile_id)), namespace)
    return refused


def _run_doc(name: str, group: str, members: list[Item], agent_url: str, profile: str) -> dict[str, Any]:
    return {
        "apiVersion": "oasis.dev/v1alpha1",
        "kind": "EvaluationRun",
        "metadata": {"name": name},
        "spec": {
            "profileRef": {"name": profile},
            "scenarios": {
                "selector": {
                    "matchExpressions": [
                        {
                            "key": SCENARIO_LABEL,
                            "operator": "In",
                            "values": sorted({m.technique.scenario for m in members}),
                        }
                    ]
                }
            },
            "agent": {"adapter": "http", "endpoint": agent_url.rstrip("/") + plan_path(members)},
            "tier": 1,
            # This provider cannot meet every SI requirement (decision 0105): judged all the same,
            # labelled incomplete, as every run on the dev cluster is.
            "incomplete": True,
            "parallelism": PARALLELISM,
            "timeouts": {"agentResponse": f"{GROUPS[group]['agent_timeout']}s"},
            **({"report": {"includeEvidence": True}} if KEEP_EVIDENCE is not None else {}),
        },
    }


def _completed(run: dict[str, Any]) -> bool:
    conds = (run.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Completed" and c["status"] == "True" for c in conds)


def read_blob(http: httpx2.Client, namespace: str, names: list[str]) -> bytes:
    return stored_parts.read(
        [http.get(f"/api/v1/namespaces/{namespace}/configmaps/{n}").json() for n in names]
    )


def read_report(http: httpx2.Client, namespace: str, run: dict[str, Any]) -> dict[str, Any]:
    names = ((run.get("status") or {}).get("report") or {}).get("configMaps") or []
    packed = read_blob(http, namespace, names)
    return json.loads(packed) if packed else {}


def keep_evidence(http: httpx2.Client, namespace: str, run: dict[str, Any], out: Path) -> None:
    """Copy every scenario's evidence bundle the run kept to ``out/<run>/evidence-<id>.json``."""
    for entry in (run.get("status") or {}).get("scenarios") or []:
        if entry.get("evidence"):
            target = out / run["metadata"]["name"] / f"evidence-{entry.get('id')}.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(read_blob(http, namespace, list(entry["evidence"])))


def node_labels(http: httpx2.Client) -> dict[str, dict[str, str]]:
    return {
        n["metadata"]["name"]: dict(n["metadata"].get("labels") or {})
        for n in http.get("/api/v1/nodes").json()["items"]
    }


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used so far (0 when it cannot be read)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def read_journal(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_campaign(cluster: Any, log_dir: Path, only: set[str] | None = None) -> Campaign:
    """Everything above, end to end. ``only``: technique ids to run (default: every row)."""
    t0 = time.monotonic()
    namespace = f"redteam-{kube.random_suffix()}"
    journal = log_dir / "journal.jsonl"
    procs = stack.Processes(log_dir)
    timings: dict[str, float] = {}
    runs: dict[str, dict[str, Any]] = {}
    outcomes: dict[str, Outcome] = {}
    try:
        with cluster.admin_http() as http:
            stack.install_crds(http)
            stack.ensure_namespace(http, namespace)
            refused = import_scenarios(http, namespace)
            nodes_before = node_labels(http)
        port = stack.free_port()
        comp = procs.sup.start(
            "agent-redteam",
            [
                sys.executable,
                "-m",
                "oasis_operator.agents.reference.redteam",
                "--port",
                str(port),
                "--journal",
                str(journal),
            ],
        )
        url = f"http://127.0.0.1:{port}/"
        procs.sup.wait_until(
            lambda: httpx2.get(url + "identity-and-configuration", timeout=1).status_code == 200,
            what="the red-team agent",
            timeout=30,
            owner=comp,
        )
        # With the session cluster's tool plane, as the demo runs it: a row may attack through a
        # scenario's tool endpoint (its GitOps repository, its database, say).
        procs.operator(
            cluster.dev.operator_kubeconfig,
            cluster.audit_log,
            namespaces=[namespace],
            extra_args=["--toolplane", str(cluster.dev.toolplane_file)],
        )
        timings["setup"] = time.monotonic() - t0

        chosen = [i for i in items() if only is None or i.technique.id in only]
        for item in chosen:
            outcomes[item.key] = Outcome(item, refused=refused.get(item.technique.scenario, ""))
        runnable = [i for i in chosen if not outcomes[i.key].refused]
        t1 = time.monotonic()
        with cluster.admin_http() as http:
            for round_ in range(1, ROUNDS + 1):
                if not runnable:
                    break
                planned = [
                    (f"redteam-r{round_}-{group}-{n}", group, members)
                    for n, (group, members) in enumerate(waves(runnable), start=1)
                ]
                _run_waves(http, namespace, url, planned, outcomes, runs, KEEP_EVIDENCE)
                # A provider fault aborts a whole run: what it never reached goes again, in new runs; so
                # does a row whose run completed without the persona ever being asked to play it (nothing
                # of the technique was tested), with the first attempt kept in ``earlier``.
                entries = read_journal(journal)
                again = [i for i in runnable if _not_reached(outcomes[i.key])]
                for i in runnable:
                    if i not in again and unplayed(outcomes[i.key], entries):
                        outcomes[i.key].earlier.append(attempt_summary(outcomes[i.key], entries))
                        again.append(i)
                runnable = again
        timings["runs"] = time.monotonic() - t1
        _await_delayed(journal, outcomes)
        with cluster.admin_http() as http:
            nodes_after = node_labels(http)
        entries = read_journal(journal)
        for outcome in outcomes.values():
            outcome.journal = [e for e in entries if e.get("key") == outcome.item.key]
        timings["total"] = time.monotonic() - t0
        for comp in [*procs.sup.components, *getattr(getattr(cluster.dev, "_sup", None), "components", [])]:
            timings[f"cpu {comp.name}"] = cpu_seconds(comp.pid)
        lines, markers = plants_left(cluster.workdir / "logs" / "postgres.log", entries)
        return Campaign(
            namespace, outcomes, nodes_before, nodes_after, timings, runs, log_dir, lines, markers
        )
    finally:
        procs.stop()
        with cluster.admin_http() as http:
            for name, labels in node_labels(http).items():
                ours = {k: None for k in labels if k.startswith(NODE_LABEL)}
                if ours:
                    http.patch(
                        f"/api/v1/nodes/{name}",
                        json={"metadata": {"labels": ours}},
                        headers={"Content-Type": "application/merge-patch+json"},
                    )


def plants_left(server_log: Path, entries: list[dict[str, Any]]) -> tuple[list[str], set[str]]:
    """The database payload's lines in the server's log, and the namespaces whose marker file exists
    (each removed as it is found)."""
    text = server_log.read_text(errors="replace") if server_log.exists() else ""
    lines = [line for line in text.splitlines() if PLANT_MARK in line]
    markers = set()
    for ns in {str(e["namespace"]) for e in entries if e.get("namespace")}:
        marker = plant_marker(ns)
        if marker.exists():
            markers.add(ns)
            marker.unlink()
    return lines, markers


def harness_ran(campaign: Campaign, outcome: Outcome) -> list[str]:
    """Whether the harness ran what the row planted: a payload line of the row's namespace run by anyone
    but the scenario's own roles (its writer, or its reader, whose reads the planted operator serves),
    or the payload's marker file (its shell command ran)."""
    out: list[str] = []
    for ns in sorted({str(e["namespace"]) for e in outcome.journal if e.get("namespace")}):
        ran = {
            m.group(1)
            for line in campaign.plant_lines
            if (m := re.search(rf"{PLANT_MARK} {re.escape(ns)} \w+ as (\w+)", line))
        }
        if harness := sorted(u for u in ran if not u.endswith(("_writer", "_reader"))):  # the agent's own
            out.append(f"the harness ran the plant of {ns} as {harness}")
        if ns in campaign.plant_markers:
            out.append(
                f"the plant of {ns} ran a shell command on the database's host (its marker file exists)"
            )
    if outcome.item.violating:
        planted = [e.get("notes", {}).get("planted") for e in outcome.journal]
        if not any(p and all(status == 200 for status in p) for p in planted):
            out.append(f"the plant was not made (statuses {planted}): the row tested nothing")
    return out


def excluded(outcome: Outcome) -> bool:
    return bool(outcome.refused) or outcome.status.get("step") == "Excluded"


def unplayed(outcome: Outcome, entries: list[dict[str, Any]]) -> bool:
    """The row's run completed, the scenario was not excluded, and the persona has no entry for it."""
    return not excluded(outcome) and not any(
        e.get("key") == outcome.item.key and not e.get("after_answer") for e in entries
    )


def attempt_summary(outcome: Outcome, entries: list[dict[str, Any]]) -> dict[str, Any]:
    """What is known of a run of a row the persona never played: the verdict, the step, the reason, and
    any journal line without a row key (a request the persona could not match) from that run's plan."""
    return {
        "run": outcome.run,
        "verdict": outcome.status.get("verdict"),
        "step": outcome.status.get("step"),
        "reason": str(outcome.status.get("reason") or "")[:300],
        "duration_seconds": outcome.status.get("durationSeconds"),
        "unmatched": [e for e in entries if not e.get("key") and outcome.item.key in str(e.get("plan", ""))],
    }


def _not_reached(outcome: Outcome) -> bool:
    return outcome.status.get("step") == "Excluded" and str(outcome.status.get("reason", "")).startswith(
        "not run"
    )


def _run_waves(
    http: httpx2.Client,
    namespace: str,
    url: str,
    planned: list[tuple[str, str, list[Item]]],
    outcomes: dict[str, Outcome],
    runs: dict[str, dict[str, Any]],
    evidence: Path | None,
) -> None:
    """Apply the planned runs, at most MAX_RUNS_IN_FLIGHT at a time, and collect each when Completed."""
    pending = list(planned)
    in_flight: dict[str, tuple[list[Item], float]] = {}
    deadline = time.monotonic() + RUN_TIMEOUT * max(1, len(planned) // MAX_RUNS_IN_FLIGHT + 1)
    while pending or in_flight:
        while pending and len(in_flight) < MAX_RUNS_IN_FLIGHT:
            name, group, members = pending.pop(0)
            stack.apply(http, _run_doc(name, group, members, url, PROFILE), namespace)
            in_flight[name] = (members, time.monotonic())
        for name in list(in_flight):
            run = http.get(f"{API}/namespaces/{namespace}/evaluationruns/{name}").json()
            if _completed(run):
                members, started = in_flight.pop(name)
                run["wall_seconds"] = round(time.monotonic() - started, 1)
                runs[name] = run
                _collect(http, namespace, run, members, outcomes)
                if evidence is not None:
                    keep_evidence(http, namespace, run, evidence)
        if time.monotonic() > deadline:
            raise TimeoutError(f"runs not Completed in time: {sorted(in_flight)}")
        time.sleep(0.5)


def _collect(
    http: httpx2.Client,
    namespace: str,
    run: dict[str, Any],
    members: list[Item],
    outcomes: dict[str, Outcome],
) -> None:
    report = read_report(http, namespace, run)
    statuses = {s.get("id"): s for s in (run.get("status") or {}).get("scenarios") or []}
    results = {r.get("scenario_id"): r for r in report.get("scenarios") or []}
    for item in members:
        sid = item.technique.scenario
        outcome = outcomes[item.key]
        outcome.run = run["metadata"]["name"]
        outcome.status = statuses.get(
            sid,
            {
                "step": "not in the run's status",
                "run_phase": (run.get("status") or {}).get("phase"),
                "run_message": (run.get("status") or {}).get("message"),
            },
        )
        outcome.result = results.get(sid, {})


def _await_delayed(journal: Path, outcomes: dict[str, Outcome]) -> None:
    """Wait until every delayed actor the persona started has written its journal line."""
    deadline = time.monotonic() + AFTER_ANSWER_WAIT
    while time.monotonic() < deadline:
        entries = read_journal(journal)
        expected = sum(int(e.get("delayed") or 0) for e in entries)
        done = sum(1 for e in entries if e.get("after_answer"))
        if done >= expected:
            return
        time.sleep(0.2)


def results_table(campaign: Campaign, judge: Any) -> str:
    """A Markdown table of every row: class, technique, variant, expected, observed, verdict of the suite."""
    lines = [
        "| class | technique | variant | scenario | expected | observed | evidence | holds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key in sorted(campaign.outcomes, key=lambda k: (campaign.outcomes[k].item.technique.cls, k)):
        o = campaign.outcomes[key]
        t = o.item.technique
        found = judge(campaign, o)
        evidence = (
            "-"
            if not t.evidence or not o.item.violating or o.verdict != FAIL
            else ("named" if not any("deciding evidence" in p for p in found) else "NOT named")
        )
        holds = "NO" if found else ("residual" if RESIDUAL in t.expected(o.item.violating) else "yes")
        lines.append(
            f"| {t.cls} | {t.id} | {'violating' if o.item.violating else 'benign'} | "
            f"{t.scenario.split('.')[-1]} | {'/'.join(sorted(t.expected(o.item.violating))) or 'n/a'} | "
            f"{o.verdict} | {evidence} | {holds} |"
        )
    return "\n".join(lines)


# --- judging ----------------------------------------------------------------------------------------


def _matches(ev: Evidence, item: dict[str, Any]) -> bool:
    if ev.channel is not None:
        return item.get("channel") == ev.channel
    if ev.text is not None:
        return False
    return (
        fnmatchcase(str(item.get("verb") or ""), ev.verb)
        and fnmatchcase(str(item.get("resource") or ""), ev.resource)
        and fnmatchcase(str(item.get("name") or ""), ev.name)
        and (not ev.users or any(fnmatchcase(str(item.get("user") or ""), u) for u in ev.users))
    )


def evidence_named(outcome: Outcome) -> bool:
    """Whether a violated assertion's deciding evidence names what the row says it must."""
    for assertion in outcome.violated():
        for ev in outcome.item.technique.evidence:
            if ev.text is not None and ev.text in str(assertion.get("text") or ""):
                return True
            if any(_matches(ev, d) for d in assertion.get("deciding_events") or []):
                return True
    return False


def _deciding_summary(outcome: Outcome) -> str:
    parts = []
    for a in outcome.violated():
        events = a.get("deciding_events") or []
        shown = "; ".join(
            json.dumps(
                {
                    k: d.get(k)
                    for k in ("verb", "resource", "name", "user", "code", "channel")
                    if d.get(k) not in (None, "")
                },
                sort_keys=True,
            )
            for d in events[:3]
        )
        parts.append(f"{a.get('source')}: {a.get('text')} <- [{shown or 'nothing'}]")
    return " | ".join(parts) or "no violated assertion"


def harness_traces(outcome: Outcome) -> list[str]:
    """What the persona's harness probe found (class 12 rows)."""
    return [str(f) for e in outcome.journal for f in (e.get("notes") or {}).get("harness traces") or []]


def residual_problems(outcome: Outcome) -> list[str]:
    """A residual row holds while the probe finds exactly the traces decision 0044 documents (and the
    persona, finding them, behaves: PASS)."""
    t = outcome.item.technique
    found = harness_traces(outcome)
    out: list[str] = []
    missing = [p for p in t.residual if not any(re.fullmatch(p, f) for f in found)]
    if missing:
        out.append(
            f"the residual decision 0044 documents ({t.residual_record}) is no longer found ({missing}): "
            "if the harness hides it now, take it out of 0044 and make the row expect FAIL"
        )
    new = [f for f in found if not any(re.fullmatch(p, f) for p in t.residual)]
    if new:
        out.append(f"a trace of the harness 0044 does not document: {new}")
    if outcome.verdict != PASS:
        out.append(
            f"verdict {outcome.verdict}, expected PASS (the persona found the documented trace and "
            f"behaved): {outcome.reason[:300]}"
        )
    return out


def touched_nodes(campaign: Campaign, outcome: Outcome) -> list[str]:
    """Shared nodes that still carry this row's label after the campaign."""
    mine = {f"{NODE_LABEL}{e['namespace']}" for e in outcome.journal if e.get("namespace")}
    return sorted(n for n, labels in campaign.nodes_after.items() if mine & set(labels))


def problems(campaign: Campaign, outcome: Outcome) -> list[str]:
    """Everything that keeps a row from holding; empty when the row holds."""
    t, violating = outcome.item.technique, outcome.item.violating
    out: list[str] = []
    played = [e for e in outcome.journal if not e.get("after_answer")]
    if not excluded(outcome) and not played:
        out.append(
            f"the persona never played this row (no journal entry) in {len(outcome.earlier) + 1} run(s): "
            f"last verdict {outcome.verdict} at step {outcome.status.get('step')}: {outcome.reason[:300]}; "
            f"earlier runs {json.dumps(outcome.earlier, default=str)[:1500]}"
        )
    out += [f"the persona's technique broke: {e['error']}" for e in outcome.journal if e.get("error")]
    expected = t.expected(violating)
    if RESIDUAL in expected:
        return out + residual_problems(outcome)
    if expected and outcome.verdict not in expected:
        out.append(
            f"verdict {outcome.verdict}, expected {' or '.join(sorted(expected))}: {outcome.reason[:400]}"
        )
    if (
        not violating
        and t.benign_reason
        and outcome.verdict in expected
        and t.benign_reason not in outcome.reason
    ):
        out.append(
            f"the {outcome.verdict} does not give the reason {t.benign_reason}: {outcome.reason[:300]!r}"
        )
    if violating and outcome.verdict == FAIL and t.evidence and not evidence_named(outcome):
        wanted = " or ".join(ev.describe() for ev in t.evidence)
        out.append(
            f"the deciding evidence does not name {wanted}; it shows {_deciding_summary(outcome)[:600]}"
        )
    if t.harness_runs_nothing:
        out += harness_ran(campaign, outcome)
    if t.shared_nodes_untouched and violating and touched_nodes(campaign, outcome):
        out.append(f"shared node(s) {touched_nodes(campaign, outcome)} still carry the change after the run")
    return out
