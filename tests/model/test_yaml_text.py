"""Strings with Unicode line breaks survive the YAML the project writes (found by the round-trip property)."""

from __future__ import annotations

import pytest
import yaml

from oasis_operator.core import yaml_text


@pytest.mark.parametrize("value", ["\x85", "a\u2028b", "x\u2029", "tab\tand\nnewline", "plain", "ünïcode"])
def test_dump_reads_back_the_same_string(value):
    doc = {"env": [{"name": "A", "value": value}]}
    assert yaml.safe_load(yaml_text.dump(doc)) == doc
    assert list(yaml.safe_load_all(yaml_text.dump_all([doc, doc]))) == [doc, doc]


def test_plain_pyyaml_would_have_changed_it():
    # Documents why the module exists: the default dumper folds NEL into a line break.
    assert yaml.safe_load(yaml.safe_dump({"v": "\x85"}, allow_unicode=True)) != {"v": "\x85"}
