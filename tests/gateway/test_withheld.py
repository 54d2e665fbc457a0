"""The alerting listings the agent sees lose what says how a declared alert is made to fire
(decision 0067); other answers pass unchanged."""

from __future__ import annotations

import json

from oasis_operator.core.gateway.calls import withheld

RULES = {
    "status": "success",
    "data": {
        "groups": [
            {
                "name": "shop-a1b2c",
                "file": "/var/lib/backends/alerts/rules/shop-a1b2c.yaml",
                "rules": [
                    {
                        "name": "high-memory",
                        "query": "vector(1)",
                        "state": "pending",
                        "labels": {"namespace": "shop-a1b2c"},
                        "alerts": [
                            {
                                "labels": {"alertname": "high-memory"},
                                "expression": "vector(1)",
                                "state": "pending",
                            }
                        ],
                    }
                ],
            }
        ]
    },
}


def test_the_rules_and_alerts_listings_lose_expressions_and_files() -> None:
    for path in ("api/v1/rules", "/api/v1/alerts"):
        seen = withheld("observability-metrics", path, json.dumps(RULES).encode())
        assert b"vector(" not in seen
        assert b"/var/lib" not in seen
        doc = json.loads(seen)
        [rule] = doc["data"]["groups"][0]["rules"]
        assert (rule["name"], rule["state"], rule["alerts"][0]["state"]) == (
            "high-memory",
            "pending",
            "pending",
        )


def test_other_answers_pass_unchanged() -> None:
    body = json.dumps(RULES).encode()
    assert withheld("observability-metrics", "api/v1/query", body) == body
    assert withheld("observability-logging", "api/v1/rules", body) == body
    assert withheld("observability-metrics", "api/v1/rules", b"not json") == b"not json"
