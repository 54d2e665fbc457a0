"""Closing a scenario's evidence window: every route the agent had in removed, and the proof that
none is left.

Called through :class:`~oasis_operator.adapters.k8s.environment.KubeEnvironment` (the environment port's
``revoke`` and ``verify_revoked``, decision 0042); what is a route and what is beyond the baseline is the
core's (:mod:`oasis_operator.core.environment.revocation`); the API server answers the access reviews.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lightkube import ApiError
from lightkube.models.authorization_v1 import ResourceAttributes, SubjectAccessReviewSpec
from lightkube.resources.authorization_v1 import SubjectAccessReview
from lightkube.resources.core_v1 import Secret, ServiceAccount
from lightkube.resources.rbac_authorization_v1 import ClusterRole, ClusterRoleBinding, Role, RoleBinding

from oasis_operator.adapters.k8s.cluster import AGENT_ACCOUNT, OnCluster, cluster_grant_name, strip
from oasis_operator.adapters.plumbing.polling import poll
from oasis_operator.core.environment.plan import EnvironmentPlan
from oasis_operator.core.environment.revocation import (
    SA_TOKEN_TYPE,
    Route,
    access_reviews,
    acting_principals,
    beyond_baseline,
    describe_review,
    grants_of,
    routes_to_remove,
)
from oasis_operator.core.errors import RevocationFailed
from oasis_operator.core.ports import Revocation


class Revoker(OnCluster):
    """Revokes agents' access on one cluster."""

    async def _list_routes(self, namespaces: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
        """The RBAC objects and credentials of the namespaces, and the cluster's bindings (as dicts)."""
        listed: dict[str, list[dict[str, Any]]] = {}

        async def take(kind: type[Any], ns: str | None, **kw: Any) -> None:
            items = [
                {**o.to_dict(), "kind": kind.__name__}
                async for o in self.client.list(kind, namespace=ns, **kw)
            ]
            listed.setdefault(kind.__name__, []).extend(items)

        jobs = [take(k, ns) for ns in namespaces for k in (RoleBinding, Role, ServiceAccount)]
        jobs += [take(Secret, ns, fields={"type": SA_TOKEN_TYPE}) for ns in namespaces]
        jobs.append(take(ClusterRoleBinding, None))
        await asyncio.gather(*jobs)
        return listed

    async def _remove(
        self, routes: Iterable[Route], listed: Mapping[str, list[dict[str, Any]]]
    ) -> list[dict[str, Any]]:
        """Delete each route; return the objects as they were just before."""
        kinds: dict[str, type[Any]] = {
            "RoleBinding": RoleBinding,
            "Role": Role,
            "ServiceAccount": ServiceAccount,
            "Secret": Secret,
            "ClusterRoleBinding": ClusterRoleBinding,
        }
        by_ref = {
            (o["kind"], o["metadata"].get("namespace") or "", o["metadata"]["name"]): o
            for objs in listed.values()
            for o in objs
        }
        routes = list(routes)
        await asyncio.gather(*(self._delete(kinds[r.kind], r.name, r.namespace or None) for r in routes))
        return [
            strip(json.loads(json.dumps(by_ref[(r.kind, r.namespace, r.name)])))
            for r in routes
            if (r.kind, r.namespace, r.name) in by_ref
        ]

    async def revoke(self, plan: EnvironmentPlan, *, rounds: int = 3) -> Revocation:
        """Close every route in (the proof is :meth:`verify_revoked`).

        First the harness's own grant goes: its account (which voids its tokens at once). Then every
        route: each RoleBinding, Role, ServiceAccount and token Secret in the scenario's namespaces that
        the scenario did not declare (the harness's bindings included), and each ClusterRoleBinding
        naming one of their subjects. When a pass finds more than the harness's own grant, something
        else was set up that might still add a route while we remove one: the scenario's objects are
        read again (up to ``rounds`` passes). Every object removed is returned as it was just before."""
        namespaces = sorted(plan.namespaces.values())
        removed: list[dict[str, Any]] = []
        try:
            account = {
                **(
                    await self.client.get(ServiceAccount, AGENT_ACCOUNT, namespace=plan.home_namespace)
                ).to_dict(),
                "kind": "ServiceAccount",
            }
            await self._delete(ServiceAccount, AGENT_ACCOUNT, plan.home_namespace)
            removed.append(strip(account))
        except ApiError as exc:
            if exc.status.code != 404:
                raise
        declared = [m for m in plan.manifests if m.get("kind") in ("Role", "RoleBinding", "ServiceAccount")]
        routes: list[Route] = []
        own = {(kind, g.namespace, AGENT_ACCOUNT) for g in plan.grants for kind in ("Role", "RoleBinding")}
        own.add(("ClusterRoleBinding", "", cluster_grant_name(plan)))
        for _ in range(rounds):
            listed = await self._list_routes(namespaces)
            found = routes_to_remove(namespaces, listed, declared)
            routes += found
            removed += await self._remove(found, listed)
            # Only the harness's own grant was found: nothing else was acting that could add a route
            # while it was removed (verification re-reads everything anyway). Otherwise look again.
            if all((r.kind, r.namespace, r.name) in own for r in found):
                break
        return Revocation(removed=tuple(removed), routes=tuple(routes))

    async def verify_revoked(
        self,
        plan: EnvironmentPlan,
        revocation: Revocation,
        *,
        seen: Iterable[Mapping[str, Any]] = (),
        harness: Iterable[str] = (),
        settle: float = 5.0,
    ) -> Revocation:
        """Prove the window closed: the agent, ``system:anonymous`` and every principal of ``seen`` (the
        window's audit events) that is neither ``harness`` nor the control plane hold no binding that
        grants more than every caller has, no route of :func:`routes_to_remove` is back, and the API
        server answers "no" to every probe of
        :data:`~oasis_operator.core.environment.grants.REVOCATION_PROBES` for each of them.

        The authorizer follows RBAC objects through a watch, so it may answer from a cache a few
        milliseconds behind the deletions: a check that finds something is repeated until ``settle``
        seconds have passed. Raises :class:`RevocationFailed` when anything is still left then (a
        provider fault)."""
        namespaces = sorted(plan.namespaces.values())
        declared = [m for m in plan.manifests if m.get("kind") in ("Role", "RoleBinding", "ServiceAccount")]
        agent = f"system:serviceaccount:{plan.home_namespace}:{AGENT_ACCOUNT}"
        principals = acting_principals(seen, agent=(agent,), harness=harness)
        reviews = access_reviews(principals, namespaces)

        async def still_allowed() -> list[str]:
            listed = await self._list_routes(namespaces)
            grants = grants_of(principals, namespaces, listed)
            left = beyond_baseline(grants, await self._rules_of(grants))
            left += [
                f"{r.kind} {r.name}{' in ' + r.namespace if r.namespace else ''} is still there ({r.why})"
                for r in routes_to_remove(namespaces, listed, declared)
            ]
            answers = await asyncio.gather(*(self._allowed(spec) for spec in reviews))
            return left + [
                describe_review(spec) for spec, allowed in zip(reviews, answers, strict=True) if allowed
            ]

        left = (await poll(still_allowed, lambda found: not found, timeout=settle)).value
        result = Revocation(
            removed=revocation.removed,
            routes=revocation.routes,
            principals=tuple(p.username for p in principals),
            still_allowed=tuple(sorted(set(left))),
            reviews=len(reviews),
        )
        if not result.verified:
            raise RevocationFailed(result)
        return result

    async def _rules_of(self, grants: Iterable[Any]) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
        """The rules of the roles the grants bind (only those: a cluster has many roles)."""
        wanted = sorted(
            {(g.role_kind, g.namespace if g.role_kind == "Role" else "", g.role_name) for g in grants}
        )

        async def rules(kind: str, ns: str, name: str) -> tuple[tuple[str, str, str], list[dict[str, Any]]]:
            try:
                obj = (
                    await self.client.get(Role, name, namespace=ns)
                    if kind == "Role"
                    else await self.client.get(ClusterRole, name)
                ).to_dict()
            except ApiError as exc:
                if exc.status.code != 404:
                    raise
                return (kind, ns, name), []
            return (kind, ns, name), list(obj.get("rules") or [])

        return dict(await asyncio.gather(*(rules(*key) for key in wanted)))

    async def _allowed(self, spec: Mapping[str, Any]) -> bool:
        """The API server's own answer: may this user (with these groups) do this?"""
        review = SubjectAccessReview(
            spec=SubjectAccessReviewSpec(
                user=spec["user"],
                groups=list(spec["groups"]),
                resourceAttributes=ResourceAttributes(**spec["resourceAttributes"]),
            )
        )
        out = await self.client.create(review)
        return bool(out.status is not None and out.status.allowed)
