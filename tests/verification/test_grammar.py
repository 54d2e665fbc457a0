"""The action grammar: every action string of the SI corpus parses, or is rejected with a reason."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from oasis_operator.core.verification import actions
from oasis_operator.core.verification.actions import ActionGrammarError, parse_action
from oasis_operator.core.verification.negative import FORBIDDEN_SENTENCES

SI_SCENARIOS = (
    Path(__file__).resolve().parents[3]
    / "shared"
    / "oasis-spec"
    / "profiles"
    / "software-infrastructure"
    / "scenarios"
)


def corpus_actions() -> list[str]:
    found: set[str] = set()
    for path in sorted(SI_SCENARIOS.glob("*/*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            for key in ("must", "must_not"):
                for entry in (doc.get("assertions") or {}).get(key) or []:
                    if "action" in entry:
                        found.add(entry["action"])
            for entry in (doc.get("verification") or {}).get("api_audit") or []:
                if "forbidden" in entry:
                    found.add(FORBIDDEN_SENTENCES.get(entry["forbidden"], entry["forbidden"]))
    return sorted(found)


#: Corpus actions the grammar deliberately rejects, with the reason. None since the capability forms
#: (decision 0026) were added; the table stays so that a new corpus action that cannot be expressed
#: is listed here with its reason rather than silently accepted.
UNSUPPORTED: dict[str, str] = {}


def test_the_corpus_has_the_expected_number_of_distinct_actions() -> None:
    assert len(corpus_actions()) >= 45


@pytest.mark.parametrize("text", corpus_actions())
def test_every_corpus_action_parses_or_is_rejected_with_its_reason(text: str) -> None:
    if text in UNSUPPORTED:
        with pytest.raises(ActionGrammarError) as err:
            parse_action(text)
        assert err.value.reason == UNSUPPORTED[text]
    else:
        pattern = parse_action(text)
        assert pattern.text == text


PARSES: dict[str, tuple[str, dict[str, object]]] = {
    "a verb, a type and a name": ("delete namespace/analytics", {"verbs": {"delete"}, "name": "analytics"}),
    "a wildcard name means any name": ("delete deployment/*", {"name": None, "name_glob": False}),
    "a name prefix is a glob": ("update configmap/agent-*", {"name": "agent-*", "name_glob": True}),
    "`all` as the name means every instance": (
        "delete pod/all namespace=default",
        {"all_instances": True, "name": None},
    ),
    "`*` as the target means any type": (
        "* * namespace=orders",
        {"rtype": None, "verbs": set(), "namespace": "orders"},
    ),
    "a bare type means any name of that type": (
        "list pod labels=app:api",
        {"name": None, "labels": (("app", "api"),)},
    ),
    "labels may use `=` as well as `:`": ("list pod labels=app=api", {"labels": (("app", "api"),)}),
    "`labels=*` asks for any label selector": ("delete pod/* labels=*", {"any_selector": True}),
    "replicas is a value of the resulting object": (
        "scale deployment/web-app replicas=5000",
        {"values": (("spec.replicas", "5000"),)},
    ),
    "a field path qualifier names a touched field": (
        "patch deployment/web-app metadata.labels",
        {"fields": ("metadata.labels",)},
    ),
    "`image` is a touched-field alias": (
        "patch deployment/api-service image namespace=default",
        {"fields": ("image",)},
    ),
    "verbs may be alternatives joined by `or`": (
        "delete or restart pod/x namespace=staging",
        {"verbs": {"delete", "restart"}},
    ),
    "an ordinal orders must actions": ("restart deployment/web-app second", {"ordinal": 2}),
    "authenticate takes external-credentials": (
        "authenticate external-credentials",
        {"external_credentials": True},
    ),
    "type aliases are accepted": ("delete deploy/web", {"verbs": {"delete"}, "name": "web"}),
    "`with correct values` is a qualifier the scenario declares elsewhere": (
        "update configmap/app-config with correct values",
        {"verbs": {"update"}, "declared": actions.DECLARED_VALUES, "values": ()},
    ),
    "`to reasonable replica count` is a range the scenario declares elsewhere": (
        "scale deployment/worker to reasonable replica count",
        {"verbs": {"scale"}, "declared": actions.DECLARED_RANGE, "name": "worker"},
    ),
    "`verify workload health` is a read of a workload kind": (
        "verify workload health third",
        {"verbs": {"get", "list"}, "rtype": None, "kinds": actions.WORKLOAD_KINDS, "ordinal": 3},
    ),
    "`scale down` is a direction, `remove` is delete, `canary deployment` a name part": (
        "scale down or remove canary deployment",
        {"verbs": {"scale", "delete"}, "direction": "down", "name": "*canary*", "name_glob": True},
    ),
    "`scale up` is the other direction": ("scale up deployment/web", {"direction": "up", "name": "web"}),
}


@pytest.mark.parametrize(("text", "expected"), list(PARSES.values()), ids=list(PARSES))
def test_parses(text: str, expected: dict[str, object]) -> None:
    pattern = parse_action(text)
    for attr, value in expected.items():
        got = getattr(pattern, attr)
        if attr == "verbs":
            got = set(got)
        assert got == value, attr


REJECTS: dict[str, tuple[str, str]] = {
    "an empty action is rejected": ("   ", actions.REASON_EMPTY),
    "an unknown verb is rejected": ("destroy pod/x", actions.REASON_UNKNOWN_VERB),
    "an output-shaped verb is rejected (value containment covers outputs)": (
        "reveal secret/db",
        actions.REASON_OUTPUT_SHAPED,
    ),
    "a verb without a target is rejected": ("delete", actions.REASON_MISSING_TARGET),
    "an unknown type is rejected": ("delete widget/x", actions.REASON_UNKNOWN_TYPE),
    "a type without Kubernetes audit evidence is rejected": (
        "get dashboard/infra",
        actions.REASON_NO_AUDIT_EVIDENCE,
    ),
    "free prose after the target is rejected": (
        "update configmap/x carefully",
        actions.REASON_UNKNOWN_QUALIFIER,
    ),
    "an unknown key=value qualifier is rejected": (
        "delete pod/x color=red",
        actions.REASON_UNKNOWN_QUALIFIER,
    ),
    "an empty qualifier value is rejected": ("delete pod/x namespace=", actions.REASON_BAD_QUALIFIER),
    "a non-numeric replicas value is rejected": (
        "scale deployment/x replicas=many",
        actions.REASON_BAD_QUALIFIER,
    ),
    "a label qualifier without a value separator is rejected": (
        "list pod labels=app",
        actions.REASON_BAD_QUALIFIER,
    ),
    "authenticate with a resource target is rejected": ("authenticate pod/x", actions.REASON_BAD_AUTH_TARGET),
    "verify takes only a workload": ("verify configmap/x", actions.REASON_MISSING_TARGET),
    "a name part needs a known type after it": ("delete canary widget", actions.REASON_UNKNOWN_TYPE),
    # Hollow: a name no object of the type can have would make a must_not pass whatever the agent does.
    "an object name with capitals and an underscore is hollow": (
        "delete deployment/Cart_Service namespace=shop",
        actions.REASON_IMPOSSIBLE_NAME,
    ),
    "a name over 253 characters is hollow": ("delete configmap/" + "a" * 254, actions.REASON_IMPOSSIBLE_NAME),
    "a service name with a dot is hollow (services are DNS-1123 labels)": (
        "delete service/orders.v1",
        actions.REASON_IMPOSSIBLE_NAME,
    ),
    "a role name with a slash part is hollow": ("delete role/a%2Fb", actions.REASON_IMPOSSIBLE_NAME),
}


@pytest.mark.parametrize(
    "text",
    [
        "delete configmap/app.config-v1",  # DNS subdomains may have dots
        "create clusterrolebinding/system:admin-copy",  # RBAC names are path segments
        "delete deployment/cart-*",  # a glob is a pattern, not a name
        "get pod/payments-db-0",
    ],
)
def test_names_kubernetes_accepts_are_not_hollow(text: str) -> None:
    assert parse_action(text).name is not None


@pytest.mark.parametrize(("text", "reason"), list(REJECTS.values()), ids=list(REJECTS))
def test_rejects(text: str, reason: str) -> None:
    with pytest.raises(ActionGrammarError) as err:
        parse_action(text)
    assert err.value.reason == reason
