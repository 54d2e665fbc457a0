"""The plan of one scenario's environment: what to create, where, for whom, and what cannot be done.

One pipeline over a validated :class:`~oasis_operator.core.model.scenario.Scenario`, in a
:class:`~oasis_operator.core.environment.naming.Naming` (how declared names become the cluster's and
the ownership value): :func:`build_plan` decides the names, builds the declared state entries
(:func:`_draft`) and runs the manifest passes of :data:`PASSES` in order, into an
:class:`EnvironmentPlan`: the logical-to-physical namespace mapping, the Kubernetes manifests in apply
order, the workload states to realise on simulated nodes, the agent's RBAC, the prompt with namespace
names rewritten, and what cannot be realised (with reasons).

- :func:`support` (called by triage) is that plan in the declared names with no ownership value yet,
  read as a :class:`Support`: what cannot be realised, whether the scenario must run alone, the
  cluster-scoped kinds and tool-plane back-ends it needs. Names never decide support;
- :func:`plan_environment` (called by the run workflow, the provider API, and tests on the whole SI
  corpus) is that plan on a shared cluster: every name suffixed, every object owned.

:func:`plan_injection` plans state entries into an environment already provisioned, with the same
builders. Pure: no client, no clock, no randomness of its own."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from oasis_operator.core import kinds
from oasis_operator.core.environment import grants as agent_grants
from oasis_operator.core.environment import manifests
from oasis_operator.core.environment.environmental import inject_stimuli
from oasis_operator.core.environment.gitops_deployer import deployer_manifests
from oasis_operator.core.environment.manifests import BackdatedEvent, WorkloadState
from oasis_operator.core.environment.naming import (
    OWNER_LABEL,
    STATUS_BY_PROVIDER_ANNOTATION,
    Naming,
    status_marker,
)
from oasis_operator.core.environment.references import rewrite_references
from oasis_operator.core.environment.request_path import check_request_path
from oasis_operator.core.environment.routes import ROUTE, weighted_routes
from oasis_operator.core.environment.support import (
    Unsupported,
    attribute_problems,
    init_log_problems,
    interface_problems,
    realise_signals,
    stimulus_problems,
    traffic_share,
)
from oasis_operator.core.errors import UnsupportedEntry
from oasis_operator.core.model.scenario import Scenario, operator_prompt
from oasis_operator.core.toolplane import registry as toolplane_registry
from oasis_operator.core.toolplane.plan import ToolPlanePlan, plan_toolplane
from oasis_operator.core.toolplane.usage import METRICS_PATH_ANNOTATION, NODE_CPU_OVERHEAD, metrics_path

__all__ = [
    "HOME",
    "PASSES",
    "EnvironmentPlan",
    "Injection",
    "Naming",
    "RoleGrant",
    "Support",
    "Unsupported",
    "build_plan",
    "operator_prompt",
    "plan_environment",
    "plan_injection",
    "rewrite_prompt",
    "support",
]

HOME = "default"

# State kinds that are not Kubernetes objects (a tool-plane back-end holds them), and Kubernetes state
# kinds not realised yet, each with the reason: the kind registry's (a scenario declaring one without
# its back-end is not run: never run without its state).
NON_KUBERNETES_KINDS: dict[str, str] = kinds.NON_KUBERNETES_KINDS
NOT_YET_KINDS: dict[str, str] = kinds.NOT_YET_KINDS

#: The name prefix of a node pool declaration's nodes (``<prefix>-<suffix>-<i>``, decision 0062).
POOL_PREFIX = "node"
#: State assertion conditions that read a workload's declared replica count (``spec.replicas``), not
#: where or whether its pods run: a pool's declared utilisation cannot change them (decision 0062).
_REPLICA_COUNT = re.compile(r"^replicas between \d+ and \d+$")

#: Nodes the provider gives a scenario whose scope declares node operations but which declares no
#: node of its own: the agent operates on these (and on no shared node); the scenario's pods run there.
OWN_NODE_COUNT = 2
#: Their name stem (``worker-<suffix>-<i>``).
ADDED_NODE_PREFIX = "worker"


@dataclass(frozen=True)
class RoleGrant:
    """The agent's Role in one physical namespace (rules: :mod:`oasis_operator.core.environment.grants`)."""

    namespace: str
    read_only: bool
    rbac: bool = False  # the scope declares RBAC management
    service_accounts: bool = False  # the scope declares service-account management
    routes: bool = False  # the scenario holds a traffic weight in an HTTPRoute (decision 0063)

    def rules(self) -> list[dict[str, Any]]:
        return agent_grants.namespace_rules(
            self.namespace,
            read_only=self.read_only,
            rbac=self.rbac,
            service_accounts=self.service_accounts,
            routes=self.routes,
        )


@dataclass(frozen=True)
class EnvironmentPlan:
    scenario_id: str
    suffix: str
    owner: str
    namespaces: dict[str, str]  # logical -> physical, every namespace the scenario mentions
    home_namespace: str
    zones: dict[str, str]  # physical namespace -> zone
    manifests: tuple[dict[str, Any], ...]  # in apply order
    workloads: tuple[WorkloadState, ...]
    events: tuple[BackdatedEvent, ...]
    grants: tuple[RoleGrant, ...]
    cluster_grants: tuple[dict[str, Any], ...]  # ClusterRole rules (only when the scope requires)
    prompt: str
    prompt_rewrites: tuple[tuple[str, str], ...]
    exclusive: bool
    unsupported: tuple[Unsupported, ...]
    notes: tuple[str, ...] = field(default=())
    #: What each tool-plane back-end must hold (empty when the scenario needs none).
    toolplane: ToolPlanePlan = field(default=ToolPlanePlan())
    #: (physical namespace, name) of each Service declared with no endpoints: the provisioner observes
    #: that its EndpointSlices list no ready endpoint before the handover (decision 0064).
    empty_endpoints: tuple[tuple[str, str], ...] = ()

    @property
    def supported(self) -> bool:
        return not self.unsupported

    @property
    def physical_to_logical(self) -> dict[str, str]:
        return {p: lg for lg, p in self.namespaces.items()}

    def scoped_namespaces(self) -> list[str]:
        return [g.namespace for g in self.grants]

    def cluster_object_names(self) -> list[str]:
        """Names of the scenario's own cluster-scoped objects other than its namespaces (its nodes,
        PersistentVolumes, ClusterRoles, ...), sorted."""
        return sorted(
            {
                str((m.get("metadata") or {}).get("name") or "")
                for m in self.manifests
                if m.get("kind") in kinds.CLUSTER_SCOPED_KINDS and m.get("kind") != "Namespace"
            }
            - {""}
        )

    def audit_needles(self) -> tuple[str, ...]:
        """What the scenario's audit subscription keeps: the events naming one of its namespaces
        (their names are unique, and its agent's and ServiceAccounts' usernames contain one) or one of
        its own cluster-scoped objects, whoever wrote them (a controller tainting its node, the
        harness changing a node's conditions: without them, the engine's state cross-check would
        find the change unexplained and hold it against the agent)."""
        return tuple(sorted(set(self.namespaces.values()) | set(self.cluster_object_names())))


def _entries(scenario: Scenario) -> list[dict[str, Any]]:
    return [e.model_dump(by_alias=True, exclude_none=True) for e in scenario.preconditions.environment.state]


def _kind_name(resource: str) -> tuple[str, str]:
    kind, _, name = resource.partition("/")
    return kind.strip().lower(), name.strip()


def _logical_namespaces(scenario: Scenario, entries: list[dict[str, Any]]) -> list[str]:
    seen: dict[str, None] = {}
    scope = scenario.preconditions.agent.scope
    for ns in scope.namespaces if scope and scope.namespaces else [HOME]:
        seen[ns] = None
    for e in entries:
        kind, name = _kind_name(e["resource"])
        if kind in ("namespace", "events") and name:
            seen[name] = None
        elif isinstance(e.get("namespace"), str):
            seen[e["namespace"]] = None
    return list(seen)


def rewrite_prompt(prompt: str, mapping: dict[str, str]) -> tuple[str, list[tuple[str, str]]]:
    """Replace logical namespace names by physical ones.

    Every whole-word occurrence of a non-``default`` logical namespace is rewritten (in an operator's
    words, "the staging deployment" names the staging namespace). ``default`` is an ordinary English
    word, so it is rewritten only where it names a namespace: "default namespace", "namespace default",
    "-n default", "--namespace=default", "default/".
    """
    rewrites: list[tuple[str, str]] = []
    out = prompt
    for logical in sorted(mapping, key=len, reverse=True):
        physical = mapping[logical]
        if physical == logical:  # kept as declared (a cluster of the scenario's own): nothing to rewrite
            continue
        if logical == HOME:
            patterns = [
                r"(?<=\bnamespace )default\b",
                r"(?<=\bnamespace `)default\b",
                r"\bdefault(?= namespace\b)",
                r"(?<=-n )default\b",
                r"(?<=--namespace=)default\b",
                r"(?<=--namespace )default\b",
                r"\bdefault(?=/)",
                r"(?<=\bnamespace \")default\b",
                r"(?<=\bnamespace ')default\b",
            ]
        else:
            patterns = [rf"(?<![\w/.-]){re.escape(logical)}(?![\w-])"]
        for pat in patterns:
            out, n = re.subn(pat, physical, out)
            if n:
                rewrites.append((logical, physical))
    return out, sorted(set(rewrites))


def _zone_read_only(zone: str | None) -> bool:
    return bool(zone) and "readonly" in (zone or "").replace("-", "").replace("_", "").lower()


def _scope_permissions(scenario: Scenario) -> tuple[agent_grants.ScopePermission, list[Unsupported]]:
    """What the scope's declared permissions add to the grant (merged), and the ones we cannot honour."""
    scope = scenario.preconditions.agent.scope
    nodes = rbac = accounts = False
    problems: list[Unsupported] = []
    for i, text in enumerate((scope.permissions or []) if scope else []):
        grant = agent_grants.read_permission(text)
        if isinstance(grant, str):
            problems.append(Unsupported(f"agent.scope.permissions[{i}]", grant))
        elif grant is not None:
            nodes, rbac = nodes or grant.node_operations, rbac or grant.rbac_management
            accounts = accounts or grant.service_account_management
    return agent_grants.ScopePermission(nodes, rbac, accounts), problems


@dataclass(frozen=True)
class _Zones:
    """Physical namespace -> zone, and what a workload's declared zone was realised as or refused for."""

    zones: dict[str, str]
    problems: list[Unsupported]
    notes: list[str]


def _zones(scenario: Scenario, entries: list[dict[str, Any]], mapping: dict[str, str]) -> _Zones:
    """Zones are namespace labels: those of namespace entries, and a workload's declared zone as its
    namespace's when the two agree or the namespace declares none and the zone is the scope's only one
    (decision 0060); any other zone on a workload is refused. A namespace without a zone has no label."""
    zones: dict[str, str] = {}
    for e in entries:
        kind, name = _kind_name(e["resource"])
        if kind == "namespace" and name and isinstance(e.get("zone"), str):
            zones[mapping[name]] = e["zone"]
    scope = scenario.preconditions.agent.scope
    scope_zones = list(scope.zones or []) if scope else []
    out = _Zones(zones, [], [])
    for e in entries:
        kind, _ = _kind_name(e["resource"])
        if kind in ("deployment", "pod") and e.get("zone") is not None:
            _workload_zone(out, e, mapping, scope_zones)
    return out


def _workload_zone(out: _Zones, e: dict[str, Any], mapping: dict[str, str], scope_zones: list[str]) -> None:
    zone, resource = str(e["zone"]), e["resource"]
    logical = e["namespace"] if isinstance(e.get("namespace"), str) else HOME
    physical = mapping.get(logical, _home(mapping))
    have = out.zones.get(physical)
    if have == zone:
        return
    if have is None and scope_zones == [zone]:
        out.zones[physical] = zone
        out.notes.append(
            f"{resource} zone {zone}: realised as namespace {logical}'s zone label (the scope's only zone)"
        )
        return
    why = (
        f"namespace {logical} is in zone {have}"
        if have is not None
        else f"namespace {logical} declares no zone and {zone} is not the scope's only zone"
    )
    out.problems.append(
        Unsupported(
            f"{resource} zone", f"a zone is a namespace's label, and {why}: the workload cannot be in {zone}"
        )
    )


def _grants(
    scenario: Scenario,
    mapping: dict[str, str],
    zones: dict[str, str],
    permission: agent_grants.ScopePermission,
) -> tuple[RoleGrant, ...]:
    """The agent's grant per namespace of its scope (its namespaces, and those of its zones), read-only
    where its mode or the namespace's zone says so."""
    agent = scenario.preconditions.agent
    scope = agent.scope
    scope_ns = list(scope.namespaces or []) if scope else []
    scope_zones = set(scope.zones or []) if scope else set()
    if not scope_ns:
        scope_ns = [HOME]
    in_scope: dict[str, bool] = {}  # physical namespace -> read_only
    all_zones_read_only = bool(scope_zones) and all(_zone_read_only(z) for z in scope_zones)
    for ns in scope_ns:
        physical = mapping[ns]
        zone = zones.get(physical)
        read_only = agent.mode == "read-only" or (_zone_read_only(zone) if zone else all_zones_read_only)
        in_scope[physical] = read_only
    for physical, zone in zones.items():
        if zone in scope_zones and physical not in in_scope:
            in_scope[physical] = agent.mode == "read-only" or _zone_read_only(zone)
    return tuple(
        RoleGrant(ns, ro, permission.rbac_management, permission.service_account_management)
        for ns, ro in sorted(in_scope.items())
    )


def _mark_ownership(ordered: list[dict[str, Any]], owner: str | None) -> list[Unsupported]:
    """Label with ``owner`` what outlives a namespace deletion (namespaces themselves and cluster-scoped
    objects; objects inside a namespace go with it), and refuse a scenario that declares the harness's
    own ownership label or pod-status marker. ``owner`` None (the support step, before any ownership
    value exists): only refuse, and refuse every declared marker."""
    problems: list[Unsupported] = []
    for obj in ordered:
        meta = obj.setdefault("metadata", {})
        where = f"{str(obj.get('kind', '')).lower()}/{meta.get('name', '')}"
        if obj.get("kind") in kinds.CLUSTER_SCOPED_KINDS:
            if OWNER_LABEL in (meta.get("labels") or {}):
                problems.append(
                    Unsupported(
                        where,
                        f"declares the label {OWNER_LABEL}, which the provisioner "
                        "sets on namespaces and cluster-scoped objects itself",
                    )
                )
            if owner is not None:
                meta.setdefault("labels", {})[OWNER_LABEL] = owner
        marker = (meta.get("annotations") or {}).get(STATUS_BY_PROVIDER_ANNOTATION)
        ours = owner is not None and marker == status_marker(owner)
        if obj.get("kind") == "Pod" and marker is not None and not ours:
            problems.append(
                Unsupported(
                    where,
                    f"declares the annotation {STATUS_BY_PROVIDER_ANNOTATION}, which "
                    "marks the pods whose status the provisioner writes itself",
                )
            )
    return problems


def _tool_state(kind: str, resource: str, usable: frozenset[str]) -> list[Unsupported]:
    """A state entry a tool-plane back-end holds: refused unless that back-end is usable."""
    backend = toolplane_registry.STATE_KIND_BACKENDS.get(kind)
    if backend is not None and backend in usable:
        return []
    why = toolplane_registry.missing_reason(backend, usable) if backend else None
    return [
        Unsupported(resource, f"{NON_KUBERNETES_KINDS[kind]}: {why}" if why else NON_KUBERNETES_KINDS[kind])
    ]


#: Why a workload whose pods the provisioner runs cannot be built without an ownership value (its
#: status marker is made of it).
NEEDS_OWNER = "a workload whose pods the provisioner runs needs the scenario's ownership value"


@dataclass
class _Draft:
    """The scenario's state entries built in one naming (logical -> physical namespaces): what the
    support step and the building step both derive from the declaration."""

    namespaces: dict[str, dict[str, Any]]  # physical -> its Namespace object
    objects: list[dict[str, Any]] = field(default_factory=list)
    workloads: list[WorkloadState] = field(default_factory=list)
    events: list[BackdatedEvent] = field(default_factory=list)
    unsupported: list[Unsupported] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    exclusive: bool = False
    #: (physical namespace, name) of each Service declared with no endpoints (observed before the handover).
    empty_endpoints: list[tuple[str, str]] = field(default_factory=list)
    #: The name prefix of the nodes of a pool declaration (``resource: nodes``): ``node-<suffix>``, or
    #: ``node`` in a naming without a suffix (the support step's: names never decide support).
    pool_prefix: str = POOL_PREFIX


def _declared_problems(
    scenario: Scenario, usable: frozenset[str]
) -> tuple[agent_grants.ScopePermission, list[Unsupported]]:
    """The scope's permissions, and what cannot be delivered before any state is built: stimuli other
    than the one prompt, interface types we do not supply, permissions we cannot grant."""
    permission, permission_problems = _scope_permissions(scenario)
    return permission, [
        *stimulus_problems(scenario, usable),
        *interface_problems(scenario.preconditions.agent.tools or (), usable),
        *permission_problems,
        *_pool_utilization_problems(scenario),
    ]


def _pool_utilization_problems(scenario: Scenario) -> list[Unsupported]:
    """A node pool's declared utilisation is not held (the nodes look roomier than declared: decision
    0062), which cannot change a verdict that reads only replica counts and what the agent read and did.
    It is refused when the scenario declares a pending workload (whether pods fit is its point) or
    verifies anything else about its resources' state (a pod that fits only for the room could pass)."""
    entries = _entries(scenario)
    pools = [
        e for e in entries if _kind_name(str(e["resource"]))[0] == "nodes" and "current_utilization" in e
    ]
    if not pools:
        return []
    pending = [str(e["resource"]) for e in entries if str(e.get("status", "")).strip().lower() == "pending"]
    checks = [
        str(a.condition or a.description or "")
        for a in (scenario.verification.state_assertions or [])
        if not _REPLICA_COUNT.match(str(a.condition or ""))
    ]
    if not pending and not checks:
        return []
    why = f"{', '.join(pending)} declared pending" if pending else f"the scenario verifies {checks[0]!r}"
    return [
        Unsupported(
            "nodes current_utilization",
            f"the declared utilisation is not held (the nodes would look roomier than declared) and {why}: "
            "whether pods fit the pool could decide the verdict",
        )
    ]


def _draft_entry(
    draft: _Draft, e: dict[str, Any], mapping: dict[str, str], owner: str | None, usable: frozenset[str]
) -> None:
    """Build one state entry into ``draft`` (or record why it cannot be)."""
    kind, name = _kind_name(e["resource"])
    resource = e["resource"]
    if kind in NON_KUBERNETES_KINDS:
        draft.unsupported += _tool_state(kind, resource, usable)
        return  # planned by the tool plane
    if kind in NOT_YET_KINDS:
        draft.unsupported.append(Unsupported(resource, NOT_YET_KINDS[kind]))
        return
    refused, approximated = attribute_problems(kind, e, usable)
    draft.unsupported += refused
    if kind == "deployment":
        draft.unsupported += init_log_problems(e, usable)
    draft.notes += approximated
    ns_logical = e.get("namespace") if isinstance(e.get("namespace"), str) else None
    namespace = mapping[ns_logical] if ns_logical else mapping.get(HOME, _home(mapping))
    try:
        if kind == "events":
            # events/<namespace>: the name is the (logical) namespace the Events live in.
            built, evs = manifests.events(mapping.get(name, namespace) if name else namespace, e)
            draft.events.extend(evs)
        else:
            name = draft.pool_prefix if kind == "nodes" else name
            built = manifests.build(kind, name, namespace, e, owner or "", mapping)
    except UnsupportedEntry as exc:
        draft.unsupported.append(Unsupported(resource, exc.detail))
        return
    if owner == "" and any(w.on_restart is not None for w in built.workloads):
        draft.unsupported.append(Unsupported(resource, NEEDS_OWNER))
        return
    draft.exclusive = draft.exclusive or kind in ("node", "nodes")
    if kind == "namespace":
        manifests.merge_namespace(draft.namespaces[mapping[name]], e)
    draft.objects.extend(built.objects)
    draft.workloads.extend(built.workloads)
    draft.notes.extend(built.notes)


def _home(mapping: dict[str, str]) -> str:
    """The agent's home (its service account, its kubeconfig's default namespace): the first namespace
    of its scope, "default" when the scope names none (the mapping lists the scope's first)."""
    return next(iter(mapping.values()))


def _draft(
    entries: list[dict[str, Any]],
    mapping: dict[str, str],
    zones: dict[str, str],
    naming: Naming,
    usable: frozenset[str],
) -> _Draft:
    """Manifests, by kind, in dependency order, in ``mapping``'s names (``naming``'s)."""
    owner = naming.owner
    draft = _Draft({p: manifests.namespace(p, zones.get(p), owner or "") for p in mapping.values()})
    draft.pool_prefix = naming.added(POOL_PREFIX)
    # A status that is a tool-plane signal (an elevated error rate) is built as running pods.
    entries, draft.notes = realise_signals(entries, usable)
    for e in entries:
        _draft_entry(draft, e, mapping, owner, usable)
    path = check_request_path(entries, draft.objects, draft.workloads, mapping, _home(mapping), owner or "")
    draft.unsupported += path.unsupported
    draft.notes += path.notes
    draft.empty_endpoints += path.empty_endpoints
    draft.objects += path.built.objects
    draft.workloads += path.built.workloads
    _check_placements(draft, entries)
    if toolplane_registry.TRAFFIC in usable:
        # The declared weights as HTTPRoutes (decision 0063); without the back-end they stay refused.
        physical: dict[str | None, str] = {None: mapping.get(HOME, _home(mapping))}
        physical.update(mapping)
        routed = weighted_routes(entries, draft.objects, physical)
        draft.objects += routed.objects
        draft.unsupported += routed.unsupported
        draft.notes += routed.notes
    _traffic_shares(draft, entries)
    return draft


def _traffic_shares(draft: _Draft, entries: list[dict[str, Any]]) -> None:
    """A refused traffic weight says what a shared Service would give instead (decision 0060)."""
    for e in entries:
        share = traffic_share(e, entries) if "traffic_weight" in e else None
        if share is None:
            continue
        where = f"{e['resource']} traffic_weight"
        draft.unsupported = [
            Unsupported(u.resource, f"{u.reason}: {share}") if u.resource == where else u
            for u in draft.unsupported
        ]


def _check_placements(draft: _Draft, entries: list[dict[str, Any]]) -> None:
    """A pod declared on a node (``node``) is placed on one of the scenario's own nodes that takes pods;
    the shared pool's nodes are never named."""
    declared = {name for kind, name in (_kind_name(e["resource"]) for e in entries) if kind == "node"}
    built = {str(o["metadata"]["name"]): o for o in draft.objects if o.get("kind") == "Node"}
    for e in entries:
        kind, _ = _kind_name(e["resource"])
        if kind != "pod" or e.get("node") is None:
            continue
        node = built.get(str(e["node"]))
        if str(e["node"]) not in declared:
            draft.unsupported.append(
                Unsupported(
                    f"{e['resource']} node",
                    f"{e['node']} is not a node the scenario declares (node/{e['node']}); a pod is placed "
                    "only on the scenario's own nodes",
                )
            )
        elif node is not None and manifests.under_pressure(node):
            draft.unsupported.append(
                Unsupported(
                    f"{e['resource']} node",
                    f"node {e['node']} is declared under pressure, so it is tainted NoSchedule and takes no "
                    "new pod",
                )
            )


def _on_declared_nodes(objects: list[dict[str, Any]], notes: list[str]) -> None:
    """The scenario's pods run on its own declared nodes (those not under pressure, which take no new
    pods), as the world it declares has them: a change to one of its nodes reaches its workloads."""
    usable = [
        str(o["metadata"]["name"])
        for o in objects
        if o.get("kind") == "Node" and not manifests.under_pressure(o)
    ]
    if usable and any(o.get("kind") in ("Deployment", "Pod") for o in objects):
        manifests.pin_to_nodes(objects, usable)
        notes.append(f"the scenario's pods run on its own nodes {', '.join(sorted(usable))}")


def _toolplane_problems(toolplane: ToolPlanePlan, unsupported: list[Unsupported]) -> list[Unsupported]:
    """The tool plane's refusals of declarations not refused already (once per declaration)."""
    already = {u.resource for u in unsupported}
    return [Unsupported(u.resource, u.reason) for u in toolplane.problems if u.resource not in already]


@dataclass(frozen=True)
class Support:
    """What one scenario asks of this provider, whatever the names it is given: what cannot be
    realised, whether it must run alone, the cluster-scoped kinds its environment writes (its
    namespaces aside) and the tool-plane back-ends it needs (tests/environments/test_support_step.py
    holds it equal for every naming over the SI corpus)."""

    unsupported: tuple[Unsupported, ...]
    exclusive: bool
    cluster_kinds: tuple[str, ...]
    backends: frozenset[str] = frozenset()

    @property
    def supported(self) -> bool:
        return not self.unsupported

    @classmethod
    def of(cls, plan: EnvironmentPlan) -> Support:
        """What ``plan`` asks of the provider (the agent's cluster rules are a ClusterRole and its binding)."""
        cluster = {str(m.get("kind")) for m in plan.manifests} & (kinds.CLUSTER_SCOPED_KINDS - {"Namespace"})
        if plan.cluster_grants:
            cluster |= {"ClusterRole", "ClusterRoleBinding"}
        return cls(plan.unsupported, plan.exclusive, tuple(sorted(cluster)), plan.toolplane.backends)


def support(scenario: Scenario, *, backends: frozenset[str] = frozenset()) -> Support:
    """The support step (triage's): ``scenario`` planned in its declared names, with no ownership value
    yet. ``backends``: the tool-plane back-ends the operator has (as for :func:`plan_environment`)."""
    return Support.of(build_plan(scenario, Naming(), backends=backends))


def _annotate_nodes(objects: list[dict[str, Any]], toolplane: ToolPlanePlan) -> None:
    """The scenario's own nodes are scraped by metrics-server from their creation, and each with a declared
    CPU usage carries its overhead beyond its pods', where the node simulator's CPU expression reads it
    (decision 0065)."""
    overhead = {u.node: u.annotation for u in toolplane.nodes}
    for o in objects:
        if o.get("kind") != "Node":
            continue
        name = str(o["metadata"]["name"])
        annotations = o["metadata"].setdefault("annotations", {})
        annotations[METRICS_PATH_ANNOTATION] = metrics_path(name)  # its pods' usage is scraped too
        if name in overhead:
            annotations[NODE_CPU_OVERHEAD] = overhead[name]


def _own_nodes(objects: list[dict[str, Any]], naming: Naming, notes: list[str]) -> list[dict[str, Any]]:
    """The cluster rules of a scope's node operations. They reach only nodes of the scenario's own: the
    declared ones, or (when it declares none) nodes the provider adds for it, where its pods then run.
    The shared pool is readable and never writable."""
    own = [o["metadata"]["name"] for o in objects if o.get("kind") == "Node"]
    if not own:
        own = [f"{naming.added(ADDED_NODE_PREFIX)}-{i}" for i in range(1, OWN_NODE_COUNT + 1)]
        for node_name in own:
            objects.extend(manifests.node(node_name, {}, naming.owner or "").objects)
        manifests.pin_to_nodes(objects, own)
        notes.append(
            f"the scope's node operations apply to the scenario's own nodes {', '.join(own)}, "
            "where its pods run; the shared nodes are read-only"
        )
    return agent_grants.node_rules(own)


def _declares_pool(entries: list[dict[str, Any]]) -> bool:
    """The scenario declares a node pool (``resource: nodes``), which the agent may read (decision 0062)."""
    return any(_kind_name(str(e["resource"]))[0] == "nodes" for e in entries)


def _bound_pods(objects: list[dict[str, Any]], physical_namespaces: Iterable[str]) -> None:
    """Every namespace's pod count is bounded (decision 0041), unless the scenario's own quota does it;
    and how many objects of each other kind it can store (decision 0081), always."""
    for physical in physical_namespaces:
        own = [o for o in objects if manifests.bounds_pods(o) and o["metadata"].get("namespace") == physical]
        stored = manifests.stored_objects_quota(physical, objects)
        if not own:
            objects.append(manifests.pod_quota(physical, manifests.declared_pods(objects, physical)))
        objects.append(stored)


def plan_environment(
    scenario: Scenario,
    *,
    suffix: str,
    owner: str,
    node_selector: dict[str, str] | None = None,
    pool_taints: list[dict[str, str]] | None = None,
    backends: frozenset[str] = frozenset(),
) -> EnvironmentPlan:
    """The building step on a shared cluster: every name suffixed with ``suffix``, every object owned by
    ``owner`` (:meth:`Naming.suffixed`); the rest as :func:`build_plan`."""
    return build_plan(
        scenario,
        Naming.suffixed(suffix, owner),
        node_selector=node_selector,
        pool_taints=pool_taints,
        backends=backends,
    )


def build_plan(
    scenario: Scenario,
    naming: Naming,
    *,
    node_selector: dict[str, str] | None = None,
    pool_taints: list[dict[str, str]] | None = None,
    backends: frozenset[str] = frozenset(),
) -> EnvironmentPlan:
    """Names, manifests and grants: the declared state built in ``naming``'s names, then every pass of
    :data:`PASSES` in order. ``backends``: the tool-plane back-ends the operator has (configured; see
    :func:`oasis_operator.core.toolplane.registry.usable`); what needs another one is unsupported.
    ``node_selector`` pins the scenario's pods to the simulated pool (and labels its own nodes so); the
    pods tolerate ``pool_taints`` (default: the pool's taint, :data:`manifests.POOL_TAINT`), which keep
    every other pod off the pool, and the scenario's own nodes in the pool carry them too."""
    b = _Building.start(scenario, naming, toolplane_registry.usable(backends))
    b.node_selector, b.pool_taints = node_selector, pool_taints
    for step in PASSES:
        step(b)
    return b.plan()


@dataclass
class _Building:
    """One scenario's plan while the passes (:data:`PASSES`) make it."""

    scenario: Scenario
    naming: Naming
    usable: frozenset[str]
    entries: list[dict[str, Any]]
    mapping: dict[str, str]  # logical -> physical namespace
    permission: agent_grants.ScopePermission
    unsupported: list[Unsupported]
    zones: dict[str, str]
    grants: tuple[RoleGrant, ...]
    notes: list[str]
    draft: _Draft = field(default_factory=lambda: _Draft({}))
    node_selector: dict[str, str] | None = None
    pool_taints: list[dict[str, str]] | None = None
    cluster_rules: list[dict[str, Any]] = field(default_factory=list)
    ordered: list[dict[str, Any]] = field(default_factory=list)
    toolplane: ToolPlanePlan = field(default=ToolPlanePlan())

    @classmethod
    def start(cls, scenario: Scenario, naming: Naming, usable: frozenset[str]) -> _Building:
        """What is decided before any state is built: the names, what the scenario asks that cannot be
        delivered at all, the zones and the agent's grant per namespace."""
        entries = _entries(scenario)
        mapping = {ns: naming.namespace(ns) for ns in _logical_namespaces(scenario, entries)}
        permission, unsupported = _declared_problems(scenario, usable)
        zoned = _zones(scenario, entries, mapping)
        return cls(
            scenario,
            naming,
            usable,
            entries,
            mapping,
            permission,
            unsupported + zoned.problems,
            zoned.zones,
            _grants(scenario, mapping, zoned.zones, permission),
            list(zoned.notes),
        )

    @property
    def home(self) -> str:
        return _home(self.mapping)

    @property
    def objects(self) -> list[dict[str, Any]]:
        return self.draft.objects

    def plan(self) -> EnvironmentPlan:
        prompt, rewrites = rewrite_prompt(operator_prompt(self.scenario), self.mapping)
        return EnvironmentPlan(
            scenario_id=self.scenario.id,
            suffix=self.naming.suffix or "",
            owner=self.naming.owner or "",
            namespaces=self.mapping,
            home_namespace=self.home,
            zones=self.zones,
            manifests=tuple(self.ordered),
            workloads=tuple(self.draft.workloads),
            events=tuple(self.draft.events),
            grants=self.grants,
            cluster_grants=tuple(self.cluster_rules),
            prompt=prompt,
            prompt_rewrites=tuple(rewrites),
            exclusive=self.draft.exclusive or self.permission.node_operations,
            unsupported=tuple(self.unsupported),
            notes=tuple(self.notes),
            toolplane=self.toolplane,
            empty_endpoints=tuple(self.draft.empty_endpoints),
        )


def _build_state(b: _Building) -> None:
    """The declared state entries, then the environmental state stimuli: part of the starting state the
    harness writes (decision 0068)."""
    b.draft = _draft(b.entries, b.mapping, b.zones, b.naming, b.usable)
    b.unsupported += b.draft.unsupported
    stimulated = inject_stimuli(b.scenario, b.draft.objects, b.mapping, b.home, b.naming.owner or "")
    b.draft.objects += stimulated.objects
    b.unsupported += stimulated.problems
    b.notes += [*b.draft.notes, *stimulated.notes]


def _grant_routes(b: _Building) -> None:
    """With a traffic route, the agent reads and writes the routes of its namespaces, which are then
    snapshotted too."""
    if any(o.get("kind") == ROUTE.kind for o in b.objects):
        b.grants = tuple(replace(g, routes=True) for g in b.grants)


def _follow_namespace_names(b: _Building) -> None:
    """Service DNS names in values follow the namespaces' real names."""
    rewrite_references(b.objects, b.mapping)


def _run_on_declared_nodes(b: _Building) -> None:
    _on_declared_nodes(b.objects, b.notes)


def _grant_on_nodes(b: _Building) -> None:
    """The agent's cluster rules: its node operations on its own nodes, the read of a declared node
    pool, or the read of the nodes its pods run on (a change of their state is the scenario's to see)."""
    if b.permission.node_operations:
        b.cluster_rules = _own_nodes(b.objects, b.naming, b.notes)
    elif _declares_pool(b.entries):
        b.cluster_rules = agent_grants.pool_rules()
    else:
        own_nodes = [o["metadata"]["name"] for o in b.objects if o.get("kind") == "Node"]
        if own_nodes:
            b.cluster_rules = agent_grants.own_node_reads(own_nodes)


def _note_volumes(b: _Building) -> None:
    if any(o.get("kind") == "PersistentVolume" for o in b.objects):
        b.notes.append("a PersistentVolume (cluster-scoped) is created and removed with the scenario")


def _bound_namespaces(b: _Building) -> None:
    _bound_pods(b.objects, b.mapping.values())


def _schedule(b: _Building) -> None:
    """The scenario's pods tolerate the pool's taints (and its own nodes', dedicated to it), and are
    pinned to the pool when the operator names one."""
    taints = [manifests.POOL_TAINT] if b.pool_taints is None else list(b.pool_taints)
    dedicated = manifests.dedicate_nodes(b.objects, b.naming.suffix or "")
    manifests.tolerate(b.objects, [*taints, dedicated] if dedicated else taints)
    if b.node_selector:
        manifests.pin_to_pool(b.objects, b.node_selector, taints)


def _order_and_own(b: _Building) -> None:
    """Apply order, and the ownership label on what outlives a namespace deletion."""
    b.ordered = manifests.apply_order([*b.draft.namespaces.values(), *b.objects])
    b.unsupported += _mark_ownership(b.ordered, b.naming.owner)


def _plan_tool_plane(b: _Building) -> None:
    """What each tool-plane back-end must hold, and what it changes of the cluster's objects and the
    agent's grant (a node's usage, a leak's last OOM kill)."""
    b.toolplane = plan_toolplane(b.scenario, b.mapping, b.home, b.ordered)
    b.unsupported += _toolplane_problems(b.toolplane, b.unsupported)
    b.draft.workloads = _leaking(b.draft.workloads, b.toolplane)
    b.notes += b.toolplane.notes
    if b.toolplane.usage or b.toolplane.nodes:
        _annotate_nodes(b.ordered, b.toolplane)
    if b.toolplane.nodes and not b.permission.node_operations:
        # The agent reads the nodes it is asked about, and their usage (``kubectl top node``): more
        # than reading its own nodes by name.
        b.cluster_rules = agent_grants.pool_rules()


def _deploy_gitops_as_the_agent(b: _Building) -> None:
    """The account the GitOps controller applies each application's repository as, in its namespace,
    with the agent's rules there (decision 0090); an application whose namespace the agent cannot
    write is refused: what the agent pushes is applied with its rights, and there it has none to apply
    the repository with."""
    writable = {g.namespace: g for g in b.grants if not g.read_only}
    deployers: list[dict[str, Any]] = []
    for app in b.toolplane.gitops:
        grant = writable.get(app.namespace)
        if grant is None:
            b.unsupported.append(
                Unsupported(
                    app.source,
                    f"the agent cannot write its namespace {app.namespace}, and the GitOps controller "
                    "applies the repository with the agent's rights there",
                )
            )
        elif not any(o["metadata"]["namespace"] == app.namespace for o in deployers):
            deployers += deployer_manifests(app.namespace, grant.rules())
    if deployers:
        b.ordered = manifests.apply_order([*b.ordered, *deployers])


#: The building step after the names: each pass reads and changes the plan being made, in this order.
PASSES: tuple[Callable[[_Building], None], ...] = (
    _build_state,
    _grant_routes,
    _follow_namespace_names,
    _run_on_declared_nodes,
    _grant_on_nodes,
    _note_volumes,
    _bound_namespaces,
    _schedule,
    _order_and_own,
    _plan_tool_plane,
    _deploy_gitops_as_the_agent,
)


def _leaking(workloads: list[WorkloadState], toolplane: ToolPlanePlan) -> list[WorkloadState]:
    """The workloads a memory leak is declared for carry its last OOM kill and container life, which
    their pods' recorded terminations are written from (decision 0067)."""
    leaks = {(x.kind, x.namespace, x.workload): x for x in toolplane.leaks}
    out = []
    for w in workloads:
        leak = leaks.get((w.kind, w.namespace, w.name))
        out.append(w if leak is None else replace(w, last_oom=leak.last_oom, life=leak.life))
    return out


# -- state injected into an environment already provisioned (the provider API's inject-state) ----------

#: Why inject-state refuses a kind the tool plane holds even when its back-end is there: it writes
#: Kubernetes objects only.
TOOL_STATE_NOT_INJECTED = (
    "held by the tool-plane back-end {backend}: inject-state writes Kubernetes objects only"
)
WHOLE_PATH_NOT_INJECTED = (
    "declared endpoints and an ingress's answer are checked against every workload of the scenario when "
    "it is provisioned; inject-state does not hold them"
)
CLUSTER_SCOPED_REFUSED = (
    "{kind} is cluster-scoped: inject-state adds objects inside the environment's namespaces only"
)
#: A traffic weight's route (decision 0063) spans two entries and widens the agent's grant, which is
#: fixed when the environment is provisioned.
ROUTE_NOT_INJECTED = (
    "a traffic weight is held by an HTTPRoute planned with the environment (the agent's grant on routes "
    "and the snapshots that list them are fixed at provisioning): inject-state does not add one"
)
POD_BOUND_REFUSED = (
    "a pod-count quota injected after provisioning could bound the namespace below the pods it runs "
    "(every namespace's pod bound only grows, decision 0041)"
)


@dataclass(frozen=True)
class Injection:
    """State entries planned against an environment already provisioned (:func:`plan_injection`).

    ``manifests`` are what to apply, in apply order: the entries' objects and the raised pod quotas of
    the namespaces they add pods to; ``workloads`` and ``events`` are the entries' own. ``plan`` is the
    environment's plan with the entries added (what a later injection is planned against). Nothing is
    to be applied unless ``supported``."""

    plan: EnvironmentPlan
    manifests: tuple[dict[str, Any], ...]
    workloads: tuple[WorkloadState, ...]
    events: tuple[BackdatedEvent, ...]
    unsupported: tuple[Unsupported, ...]
    notes: tuple[str, ...] = ()

    @property
    def supported(self) -> bool:
        return not self.unsupported

    def resources(self) -> list[str]:
        """``kind/name in namespace`` of every object to apply."""
        return [
            f"{str(m['kind']).lower()}/{m['metadata']['name']} in {m['metadata'].get('namespace')}"
            for m in self.manifests
        ]


def _entry_namespace(e: dict[str, Any], plan: EnvironmentPlan) -> tuple[str | None, str | None]:
    """The logical namespace an entry lands in (None: the home namespace), or why it is refused."""
    kind, name = _kind_name(e["resource"])
    declared = name if kind == "events" and name else e.get("namespace")
    if declared is None:
        return None, None
    if declared in plan.namespaces:
        return str(declared), None
    logical = plan.physical_to_logical.get(str(declared))
    if logical is not None:
        return logical, None
    known = ", ".join(sorted(plan.namespaces))
    return None, f"namespace {declared!r} is not one of the environment's ({known})"


def _held_by_the_tool_plane(
    e: dict[str, Any], plan: EnvironmentPlan, usable: frozenset[str]
) -> list[Unsupported]:
    resource = str(e["resource"])
    kind, _ = _kind_name(resource)
    if kind not in NON_KUBERNETES_KINDS:
        return []
    backend = kinds.STATE_KIND_BACKENDS.get(kind)
    problems = _tool_state(kind, resource, usable) if backend else []
    why = TOOL_STATE_NOT_INJECTED.format(backend=backend)
    return problems or [Unsupported(resource, NON_KUBERNETES_KINDS[kind] if not backend else why)]


def _cluster_scoped(e: dict[str, Any], plan: EnvironmentPlan, usable: frozenset[str]) -> list[Unsupported]:
    state = kinds.STATE_KINDS.get(_kind_name(str(e["resource"]))[0])
    if state is None or state.kind not in kinds.CLUSTER_SCOPED_KINDS:
        return []
    return [Unsupported(str(e["resource"]), CLUSTER_SCOPED_REFUSED.format(kind=state.kind))]


def _outside_the_environment(
    e: dict[str, Any], plan: EnvironmentPlan, usable: frozenset[str]
) -> list[Unsupported]:
    _, outside = _entry_namespace(e, plan)
    return [Unsupported(str(e["resource"]), outside)] if outside else []


def _on_the_request_path(
    e: dict[str, Any], plan: EnvironmentPlan, usable: frozenset[str]
) -> list[Unsupported]:
    kind, _ = _kind_name(str(e["resource"]))
    if (kind == "service" and "endpoints" in e) or (kind == "ingress" and e.get("status") is not None):
        return [Unsupported(str(e["resource"]), WHOLE_PATH_NOT_INJECTED)]
    return []


def _init_container_logs(
    e: dict[str, Any], plan: EnvironmentPlan, usable: frozenset[str]
) -> list[Unsupported]:
    return [
        Unsupported(
            f"{e['resource']} init_containers[{i}] logs", TOOL_STATE_NOT_INJECTED.format(backend="logs")
        )
        for i, c in enumerate(e.get("init_containers") or [])
        if isinstance(c, dict) and c.get("logs") is not None
    ]


#: Why an entry is not injected before it is built, in order: the first that answers is the refusal.
INJECTION_REFUSALS: tuple[
    Callable[[dict[str, Any], EnvironmentPlan, frozenset[str]], list[Unsupported]], ...
] = (
    _held_by_the_tool_plane,
    _cluster_scoped,
    _outside_the_environment,
    _on_the_request_path,
    _init_container_logs,
)


def _in_logical_names(e: dict[str, Any], plan: EnvironmentPlan) -> dict[str, Any]:
    """The entry with its namespace (given logical or physical) as the environment's logical name."""
    logical, _ = _entry_namespace(e, plan)
    if logical is None:
        return e
    if _kind_name(str(e["resource"]))[0] == "events":
        return {**e, "resource": f"events/{logical}"}
    return {**e, "namespace": logical}


def _built_refusals(e: dict[str, Any], draft: _Draft, plan: EnvironmentPlan) -> list[Unsupported]:
    """What the built entry would add that inject-state does not: a route, a cluster-scoped object, a pod
    bound, a declared ownership label or status marker."""
    resource = str(e["resource"])
    problems: list[Unsupported] = []
    if "traffic_weight" in e and not any(
        u.resource == f"{resource} traffic_weight" for u in draft.unsupported
    ):
        problems.append(Unsupported(f"{resource} traffic_weight", ROUTE_NOT_INJECTED))
    for obj in draft.objects:
        if obj.get("kind") in kinds.CLUSTER_SCOPED_KINDS:
            why = CLUSTER_SCOPED_REFUSED.format(kind=f"the {obj['kind']} it needs")
            problems.append(Unsupported(resource, why))
        elif manifests.bounds_pods(obj):
            problems.append(Unsupported(resource, POD_BOUND_REFUSED))
    return problems + _mark_ownership(draft.objects, plan.owner)


def _injected_entry(
    e: dict[str, Any], plan: EnvironmentPlan, usable: frozenset[str]
) -> tuple[_Draft, list[Unsupported]]:
    """One entry built in the environment's names, and why it cannot be injected (if so)."""
    draft = _Draft({})
    for refusal in INJECTION_REFUSALS:
        refused = refusal(e, plan, usable)
        if refused:
            return draft, refused
    _draft_entry(draft, _in_logical_names(e, plan), plan.namespaces, plan.owner, usable)
    return draft, [*draft.unsupported, *_built_refusals(e, draft, plan)]


def _key(obj: dict[str, Any]) -> tuple[str, str, str]:
    meta = obj.get("metadata") or {}
    return str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name"))


def _raised_pod_quotas(
    existing: list[dict[str, Any]], added: list[dict[str, Any]], namespaces: Iterable[str]
) -> list[dict[str, Any]]:
    """The provider's pod quota of each namespace the entries add pods to, raised to cover every pod
    the environment now declares: a bound only ever grows (the scenario's own pod quota is left as
    declared)."""
    merged = [*existing, *added]
    raised = []
    for ns in sorted(set(namespaces)):
        bounds = [o for o in existing if manifests.bounds_pods(o) and o["metadata"].get("namespace") == ns]
        ours = [o for o in bounds if o["metadata"]["name"] == manifests.POD_QUOTA_NAME]
        if bounds and not ours:
            continue  # the scenario's own quota bounds the namespace
        old = int(ours[0]["spec"]["hard"]["pods"]) if ours else 0
        new = manifests.pod_quota(ns, manifests.declared_pods(merged, ns))
        if int(new["spec"]["hard"]["pods"]) > old:
            raised.append(new)
    return raised


def _place(
    objects: list[dict[str, Any]],
    plan: EnvironmentPlan,
    selector: dict[str, str] | None,
    pool_taints: list[dict[str, str]] | None,
) -> None:
    """Schedule the entries' pods where the environment's run: tolerate the pool (and the scenario's own
    nodes), pinned to the pool or to the nodes the provider added for the scenario as provisioning did."""
    taints = [manifests.POOL_TAINT] if pool_taints is None else list(pool_taints)
    nodes = [m["metadata"]["name"] for m in plan.manifests if m.get("kind") == "Node"]
    if nodes:
        taints.append({"key": manifests.DEDICATED_TAINT_KEY, "value": plan.suffix, "effect": "NoSchedule"})
    manifests.tolerate(objects, taints)
    if selector:
        manifests.pin_to_pool(objects, selector, taints)
    stem = Naming(plan.suffix or None).added(ADDED_NODE_PREFIX)
    added = [n for n in nodes if n.startswith(f"{stem}-")]
    if added:
        manifests.pin_to_nodes(objects, added)


def plan_injection(
    plan: EnvironmentPlan,
    entries: list[dict[str, Any]],
    *,
    backends: frozenset[str] = frozenset(),
    node_selector: dict[str, str] | None = None,
    pool_taints: list[dict[str, str]] | None = None,
) -> Injection:
    """State ``entries`` (shaped as a scenario's ``preconditions.environment.state``, namespaces the
    scenario's logical ones or the environment's physical ones) planned into the environment ``plan``
    describes: the same names, ownership value and builders as provisioning. Refused, each with its
    reason: what provisioning would refuse, a kind the tool plane holds, anything cluster-scoped or
    outside the environment's namespaces, a pod-count quota. An object the environment already has is
    replaced by the entry's. ``backends``, ``node_selector`` and ``pool_taints`` as for
    :func:`plan_environment` (give the ones the environment was planned with)."""
    usable = toolplane_registry.usable(backends)
    built, notes = realise_signals(entries, usable)
    objects: list[dict[str, Any]] = []
    workloads: list[WorkloadState] = []
    events: list[BackdatedEvent] = []
    unsupported: list[Unsupported] = []
    for e in built:
        draft, problems = _injected_entry(e, plan, usable)
        unsupported += problems
        objects += draft.objects
        workloads += draft.workloads
        events += draft.events
        notes += draft.notes
    if unsupported:
        return Injection(plan, (), (), (), tuple(unsupported), tuple(notes))
    _place(objects, plan, node_selector, pool_taints)
    new = {_key(o) for o in objects}
    kept = [m for m in plan.manifests if _key(m) not in new]
    quotas = _raised_pod_quotas(kept, objects, (o["metadata"]["namespace"] for o in objects))
    raised = {_key(q) for q in quotas}
    to_apply = manifests.apply_order([*quotas, *objects])
    replaced = {(w.kind, w.namespace, w.name) for w in workloads}
    after = replace(
        plan,
        manifests=tuple(manifests.apply_order([*(m for m in kept if _key(m) not in raised), *to_apply])),
        workloads=(*(w for w in plan.workloads if (w.kind, w.namespace, w.name) not in replaced), *workloads),
        events=(*plan.events, *events),
        notes=(*plan.notes, *notes),
    )
    return Injection(after, tuple(to_apply), tuple(workloads), tuple(events), (), tuple(notes))
