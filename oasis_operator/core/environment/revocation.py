"""Closing the window: every route by which anything could still act in a scenario, and the proof that
none is left.

Called by the environment provider's ``revoke`` after the agent's turn (and by tests). It turns the
RBAC objects and credentials listed in the scenario's namespaces and the cluster, the principals seen
acting in the window and the harness's own identities into (1) the objects to delete — every
RoleBinding, Role, ServiceAccount and token Secret of the scenario's namespaces that the scenario did
not declare (the harness's own grant included), every ClusterRoleBinding that names one of their
subjects — and (2) after deletion, the routes that remain: a binding anywhere that still grants one of
the principals more than every caller has. The provider then asks the API server itself
(SubjectAccessReview, :func:`access_reviews`) for each principal, including ``system:anonymous``.
Anything left is a provider failure: the window could not be closed. Pure: values in, values out.
Decision record: docs/decisions/0042-closing-the-window.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from oasis_operator.core.environment.grants import REVOCATION_CLUSTER_PROBES, REVOCATION_PROBES

ANONYMOUS = "system:anonymous"
SA_TOKEN_TYPE = "kubernetes.io/service-account-token"

#: Identities of the control plane (controllers under their kube-system accounts, the scheduler and
#: controller manager, nodes, the API server itself, the node simulator). No agent can hold one: they
#: are certificates or kube-system accounts the scenario never reaches.
CONTROL_PLANE_PREFIXES = (
    "system:node:",
    "system:serviceaccount:kube-system:",
    "system:kube-",
    "system:apiserver",
)
CONTROL_PLANE_USERS = frozenset({"system:node-simulator"})

#: What every caller may do (discovery, health, asking about itself): a binding that grants only this
#: is not a route in.
_BASELINE_RESOURCES = frozenset(
    {
        ("authorization.k8s.io", "selfsubjectaccessreviews"),
        ("authorization.k8s.io", "selfsubjectrulesreviews"),
        ("authentication.k8s.io", "selfsubjectreviews"),
    }
)


def is_control_plane(username: str) -> bool:
    return username.startswith(CONTROL_PLANE_PREFIXES) or username in CONTROL_PLANE_USERS


@dataclass(frozen=True, order=True)
class Principal:
    """An identity as the authorizer sees it: the user name and its groups."""

    username: str
    groups: tuple[str, ...] = ()


def principal(username: str, groups: Iterable[str] = ()) -> Principal:
    """The identity with the groups the API server gives it (service accounts, anonymous), plus any seen."""
    found = set(groups)
    if username == ANONYMOUS:
        found.add("system:unauthenticated")
    elif username.startswith("system:serviceaccount:"):
        ns = username.split(":")[2]
        found |= {"system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"}
    else:
        found.add("system:authenticated")
    return Principal(username, tuple(sorted(found)))


def acting_principals(
    events: Iterable[Mapping[str, Any]], *, agent: Iterable[str], harness: Iterable[str]
) -> tuple[Principal, ...]:
    """Everyone to verify: the agent's principals, ``system:anonymous``, and every principal seen acting
    in the window that is neither the harness nor the control plane (with the groups it was seen with).
    An identity the harness impersonates (a GitOps controller applying as the account that holds the
    agent's rights, decision 0090) is the harness acting, not someone holding that identity's
    credentials: it is verified only when seen acting as itself."""
    harness_names = set(harness)
    seen: dict[str, set[str]] = {name: set() for name in agent}
    seen.setdefault(ANONYMOUS, set())
    for event in events:
        by = event.get("user")
        by_harness = isinstance(by, Mapping) and str(by.get("username") or "") in harness_names
        for key in ("user", "impersonatedUser"):
            user = event.get(key)
            if not isinstance(user, Mapping) or (key == "impersonatedUser" and by_harness):
                continue
            name = str(user.get("username") or "")
            if not name or name in harness_names or is_control_plane(name):
                continue
            bucket = seen.setdefault(name, set())
            groups = user.get("groups")
            if isinstance(groups, list):
                bucket.update(str(g) for g in groups if isinstance(g, str))
    return tuple(sorted(principal(name, groups) for name, groups in seen.items()))


@dataclass(frozen=True, order=True)
class Route:
    """An object through which something could still act, and why it is one."""

    kind: str
    namespace: str
    name: str
    why: str


def _ref(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _same_binding(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return a.get("roleRef") == b.get("roleRef") and sorted(map(repr, a.get("subjects") or [])) == sorted(
        map(repr, b.get("subjects") or [])
    )


def _as_declared(kind: str, obj: Mapping[str, Any], declared: Mapping[str, Any]) -> bool:
    if kind == "RoleBinding":
        return _same_binding(obj, declared)
    return obj.get("rules") == declared.get("rules")


def _subject_in(subject: Mapping[str, Any], namespaces: frozenset[str]) -> bool:
    kind, name = subject.get("kind"), str(subject.get("name") or "")
    if kind == "ServiceAccount":
        return str(subject.get("namespace") or "") in namespaces
    if kind == "Group" and name.startswith("system:serviceaccounts:"):
        return name.removeprefix("system:serviceaccounts:") in namespaces
    if kind == "User" and name.startswith("system:serviceaccount:"):
        return name.split(":")[2] in namespaces if name.count(":") >= 3 else False
    return False


def routes_to_remove(
    namespaces: Iterable[str],
    listed: Mapping[str, Sequence[Mapping[str, Any]]],
    declared: Sequence[Mapping[str, Any]],
) -> list[Route]:
    """The objects revocation deletes.

    ``listed``: ``RoleBinding``, ``Role``, ``ServiceAccount``, ``Secret`` (of the scenario's namespaces)
    and ``ClusterRoleBinding`` (of the cluster) as the API returns them. ``declared``: the scenario's own
    manifests (a declared RBAC object stays if it is as declared)."""
    scenario_ns = frozenset(namespaces)
    declared_by_ref = {(str(m.get("kind")), *_ref(m)): m for m in declared}
    out: list[Route] = []
    for kind in ("RoleBinding", "Role"):
        for obj in listed.get(kind, ()):
            ns, name = _ref(obj)
            if ns not in scenario_ns:
                continue
            mine = declared_by_ref.get((kind, ns, name))
            if mine is None:
                out.append(Route(kind, ns, name, "not declared by the scenario"))
            elif not _as_declared(kind, obj, mine):
                out.append(Route(kind, ns, name, "changed since it was declared"))
    for obj in listed.get("ServiceAccount", ()):
        ns, name = _ref(obj)
        if ns in scenario_ns and name != "default" and ("ServiceAccount", ns, name) not in declared_by_ref:
            out.append(Route("ServiceAccount", ns, name, "its tokens authenticate until it is deleted"))
    for obj in listed.get("Secret", ()):
        ns, name = _ref(obj)
        if ns in scenario_ns and obj.get("type") == SA_TOKEN_TYPE:
            out.append(Route("Secret", ns, name, "a service account token"))
    for obj in listed.get("ClusterRoleBinding", ()):
        _, name = _ref(obj)
        if any(_subject_in(s, scenario_ns) for s in obj.get("subjects") or [] if isinstance(s, Mapping)):
            out.append(Route("ClusterRoleBinding", "", name, "names a subject of the scenario's namespaces"))
    return sorted(out)


def _matches(subject: Mapping[str, Any], who: Principal, binding_ns: str) -> bool:
    kind, name = subject.get("kind"), str(subject.get("name") or "")
    if kind == "User":
        return name == who.username
    if kind == "Group":
        return name in who.groups
    if kind == "ServiceAccount":
        ns = str(subject.get("namespace") or binding_ns)
        return who.username == f"system:serviceaccount:{ns}:{name}"
    return False


def _beyond_baseline(rules: Sequence[Mapping[str, Any]]) -> bool:
    for rule in rules:
        resources = rule.get("resources") or []
        if not resources:
            continue  # nonResourceURLs only: discovery and health
        groups = rule.get("apiGroups") or [""]
        if not all((g, r) in _BASELINE_RESOURCES for g in groups for r in resources):
            return True
    return False


@dataclass(frozen=True, order=True)
class Grant:
    """A binding that names a principal (directly or through one of its groups), and the role it binds."""

    username: str
    kind: str  # RoleBinding | ClusterRoleBinding
    namespace: str  # the RoleBinding's namespace; "" for a ClusterRoleBinding
    name: str
    role_kind: str  # Role | ClusterRole
    role_name: str

    def describe(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        return f"{self.username}: {self.kind} {self.name}{where} grants {self.role_kind} {self.role_name}"


def grants_of(
    principals: Iterable[Principal],
    namespaces: Iterable[str],
    listed: Mapping[str, Sequence[Mapping[str, Any]]],
) -> list[Grant]:
    """Every RoleBinding of a scenario namespace and every ClusterRoleBinding naming one of the
    principals (by name, account or group)."""
    scenario_ns = frozenset(namespaces)
    out: list[Grant] = []
    for who in principals:
        for kind in ("RoleBinding", "ClusterRoleBinding"):
            for binding in listed.get(kind, ()):
                ns, name = _ref(binding)
                if kind == "RoleBinding" and ns not in scenario_ns:
                    continue
                subjects = [s for s in binding.get("subjects") or [] if isinstance(s, Mapping)]
                if any(_matches(s, who, ns) for s in subjects):
                    ref = binding.get("roleRef") or {}
                    out.append(
                        Grant(
                            who.username,
                            kind,
                            ns if kind == "RoleBinding" else "",
                            name,
                            str(ref.get("kind") or ""),
                            str(ref.get("name") or ""),
                        )
                    )
    return sorted(set(out))


def beyond_baseline(
    grants: Iterable[Grant], rules_of: Mapping[tuple[str, str, str], Sequence[Mapping[str, Any]]]
) -> list[str]:
    """The grants whose role gives more than every caller has. ``rules_of``: (role kind, namespace
    ("" for a ClusterRole), name) -> rules; a role that cannot be found grants nothing."""
    out = []
    for g in grants:
        key = (g.role_kind, g.namespace if g.role_kind == "Role" else "", g.role_name)
        if _beyond_baseline(rules_of.get(key, [])):
            out.append(g.describe())
    return sorted(set(out))


def remaining_routes(
    principals: Iterable[Principal],
    namespaces: Iterable[str],
    listed: Mapping[str, Sequence[Mapping[str, Any]]],
) -> list[str]:
    """After deletion: each binding that still grants a principal more than every caller has, in a
    scenario namespace (RoleBinding) or anywhere (ClusterRoleBinding). ``listed`` holds the bindings
    and the ``Role`` and ``ClusterRole`` objects they refer to."""
    rules_of: dict[tuple[str, str, str], Sequence[Mapping[str, Any]]] = {}
    for kind in ("Role", "ClusterRole"):
        for obj in listed.get(kind, ()):
            ns, name = _ref(obj)
            rules_of[(kind, ns if kind == "Role" else "", name)] = obj.get("rules") or []
    return beyond_baseline(grants_of(principals, namespaces, listed), rules_of)


def access_reviews(principals: Iterable[Principal], namespaces: Iterable[str]) -> list[dict[str, Any]]:
    """The SubjectAccessReview specs that must all come back "not allowed" (one per principal, probe
    and namespace, plus the cluster-wide probes)."""
    out: list[dict[str, Any]] = []
    nss = sorted(set(namespaces))
    for who in principals:
        for verb, group, resource, sub in REVOCATION_PROBES:
            for ns in nss:
                attrs = {"namespace": ns, "verb": verb, "group": group, "resource": resource}
                if sub:
                    attrs["subresource"] = sub
                out.append({"user": who.username, "groups": list(who.groups), "resourceAttributes": attrs})
        for verb, group, resource, sub in REVOCATION_CLUSTER_PROBES:
            attrs = {"verb": verb, "group": group, "resource": resource}
            if sub:
                attrs["subresource"] = sub
            out.append({"user": who.username, "groups": list(who.groups), "resourceAttributes": attrs})
    return out


def describe_review(spec: Mapping[str, Any]) -> str:
    a = spec.get("resourceAttributes") or {}
    target = "/".join(x for x in (str(a.get("resource") or ""), str(a.get("subresource") or "")) if x)
    where = f" in {a['namespace']}" if a.get("namespace") else " cluster-wide"
    return f"{spec.get('user')} may still {a.get('verb')} {target}{where}"
