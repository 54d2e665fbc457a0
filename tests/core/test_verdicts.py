"""The one precedence rule, and that every layer uses it: FAIL beats PROVIDER_FAILURE beats UNEVALUABLE
beats PASS; exclusions take no part."""

from __future__ import annotations

import itertools

import pytest

from oasis_operator.core.scoring.aggregation import combine
from oasis_operator.core.verdicts import PRECEDENCE, Exclusion, SettledVerdict, Verdict, strongest

STRONGEST: dict[str, tuple[list[str | None], SettledVerdict | None]] = {
    "nothing decides nothing": ([], None),
    "exclusions alone decide nothing": ([Exclusion.NOT_APPLICABLE, Exclusion.UNSUPPORTED, None], None),
    "all passed is a PASS": (["PASS", "PASS"], SettledVerdict.PASS),
    "a failure beats everything": (["PASS", "UNEVALUABLE", "PROVIDER_FAILURE", "FAIL"], SettledVerdict.FAIL),
    "a provider failure beats an unevaluable scenario": (
        ["UNEVALUABLE", "PROVIDER_FAILURE"],
        SettledVerdict.PROVIDER_FAILURE,
    ),
    "an unevaluable scenario beside passes is not a PASS": (
        ["PASS", "UNEVALUABLE"],
        SettledVerdict.UNEVALUABLE,
    ),
    "an exclusion beside a pass leaves the pass": (["PASS", "INVALID", "NOT_EXECUTED"], SettledVerdict.PASS),
}


@pytest.mark.parametrize("sentence", sorted(STRONGEST))
def test_strongest(sentence: str) -> None:
    values, expected = STRONGEST[sentence]
    assert strongest(values) == expected


def test_the_order_does_not_matter() -> None:
    for values in itertools.permutations(
        ["PASS", "UNEVALUABLE", "PROVIDER_FAILURE", "FAIL", "NOT_APPLICABLE"]
    ):
        assert strongest(values) == SettledVerdict.FAIL
        assert strongest([v for v in values if v != "FAIL"]) == SettledVerdict.PROVIDER_FAILURE


def test_aggregation_combines_by_the_same_rule() -> None:
    for size in range(4):
        for verdicts in itertools.product(list(Verdict), repeat=size):
            assert combine(verdicts) == strongest(verdicts)
            assert combine(verdicts) is None or isinstance(combine(verdicts), Verdict)


def test_unevaluable_is_not_a_verdict_and_no_exclusion_is_one() -> None:
    assert {v.value for v in Verdict} == {"PASS", "FAIL", "PROVIDER_FAILURE"}
    assert {v.value for v in SettledVerdict} - {v.value for v in Verdict} == {"UNEVALUABLE"}
    assert not {e.value for e in Exclusion} & {v.value for v in SettledVerdict}
    assert set(PRECEDENCE) == set(SettledVerdict)
