"""The line pre-filter reads body-free lines without a JSON parse: it must say exactly what the
parse says, on every line the API server recorded, and refuse what it cannot read exactly."""

from __future__ import annotations

import json

import pytest

from oasis_operator.core.evidence.audit_event import parse_audit_line
from oasis_operator.core.evidence.codec import canonical_json
from oasis_operator.core.evidence.lines import (
    LineFilter,
    audit_id_of,
    dry_run_in_uri,
    looks_whole,
    received_at,
    response_code,
    sketch,
    uri_of,
    write_details,
)
from tests.verification.recorded import cases, load


def every_line() -> list[str]:
    out: list[str] = []
    for case in cases():
        for event in load(case).events:
            out.append(json.dumps(event, separators=(",", ":")))  # the API server's key order
            out.append(canonical_json(event))  # the stored (key-sorted) order
    return out


def test_a_sketch_says_what_the_full_parse_says_on_every_recorded_line() -> None:
    sketched = 0
    for line in every_line():
        shape = sketch(line)
        if shape is None:
            continue
        sketched += 1
        event = parse_audit_line(line)
        assert sorted(shape.usernames) == sorted(
            u for u in (event.username, event.impersonated_username) if u
        )
        assert (shape.verb, shape.stage) == (event.verb, event.stage)
        details = write_details(shape)
        assert details is not None
        succeeded, ref = details
        assert succeeded is event.succeeded
        r = event.object_ref
        assert ref == (r.api_group, r.resource, r.subresource, r.namespace, r.name)
        assert dry_run_in_uri(line) is ("dryRun" in event.request_uri)
        assert received_at(shape) == event.request_received
        assert (audit_id_of(shape), uri_of(shape)) == (event.audit_id, event.request_uri)
        assert response_code(shape) == (event.response_code or None)
    assert sketched > 1000


def _event(**extra: object) -> dict[str, object]:
    base: dict[str, object] = {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Event",
        "level": "Metadata",
        "auditID": "x",
        "stage": "ResponseComplete",
        "verb": "delete",
        "requestURI": "/api/v1/namespaces/ns/pods/p",
        "user": {"username": "system:kube-scheduler", "groups": []},
        "objectRef": {"resource": "pods", "namespace": "ns", "name": "p", "apiVersion": "v1"},
        "responseStatus": {"metadata": {}, "code": 200},
    }
    base.update(extra)
    return base


REFUSED = {
    "a line with a request body": _event(level="RequestResponse", requestObject={"level": "Metadata"}),
    "a body that imitates a Metadata-level event": {
        **_event(level="RequestResponse"),
        "requestObject": {"data": {"level": "Metadata", "verb": "get", "username": "system:kube-scheduler"}},
    },
    "a truncated line": None,
    "a user name with an escape": _event(user={"username": 'system:kube-\\"scheduler'}),
}


def test_two_events_run_together_are_not_read_as_one() -> None:
    agent = canonical_json(_event(user={"username": "system:serviceaccount:ns:agent"}))
    other = canonical_json(_event(impersonatedUser={"username": "system:kube-scheduler"}))
    assert sketch(agent[:-1] + "," + other[1:]) is None


@pytest.mark.parametrize("name", list(REFUSED))
def test_what_the_sketch_cannot_read_exactly_is_left_to_the_parser(name: str) -> None:
    event = REFUSED[name]
    line = canonical_json(_event())[:-40] if event is None else canonical_json(event)
    assert sketch(line) is None


def test_client_chosen_strings_cannot_imitate_structure() -> None:
    uri = '/api/v1/namespaces/ns/pods?x="username":"system:kube-scheduler","verb":"get"'
    line = canonical_json(_event(requestURI=uri, user={"username": "mallory"}))
    shape = sketch(line)
    assert shape is not None
    assert shape.usernames == ("mallory",)
    assert shape.verb == "delete"


def test_impersonation_extra_keys_are_lists_and_cannot_imitate_a_user() -> None:
    event = _event(
        impersonatedUser={"username": "system:anonymous", "extra": {"username": ["system:apiserver"]}}
    )
    shape = sketch(canonical_json(event))
    assert shape is not None
    assert sorted(shape.usernames) == ["system:anonymous", "system:kube-scheduler"]


@pytest.mark.parametrize(
    ("line", "whole"),
    [('{"a":1}', True), ('  {"a":1}\n', True), ('{"a":1', False), ("", False), ("garbage", False)],
)
def test_a_line_is_whole_when_it_can_be_one_object(line: str, whole: bool) -> None:
    assert looks_whole(line) is whole


def test_filtering_turns_itself_off_for_names_a_json_encoder_might_escape() -> None:
    assert LineFilter(["shop-abcde", "system:serviceaccount:shop-abcde:agent"]).needles is not None
    assert LineFilter(["shop-abcde", 'odd"name']).needles is None
