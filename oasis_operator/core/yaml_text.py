"""YAML text the project writes (manifests, reports, CRDs), byte-faithful for every string.

Called by the importer, the report renderer and the CRD generator; turns plain data into YAML that
reads back to the same data. PyYAML's default style choice writes the Unicode line breaks NEL, LS and
PS raw inside plain, single-quoted or block scalars, where a reader folds them into ordinary line
breaks: such strings are forced into double quotes, where they are escaped.
"""

from __future__ import annotations

from typing import Any

import yaml

_LINE_BREAKS = ("\x85", "\u2028", "\u2029")


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if any(c in value for c in _LINE_BREAKS):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
    return dumper.represent_str(value)


_Dumper.add_representer(str, _str)


def dump(data: Any, **kwargs: Any) -> str:
    out: str = yaml.dump(data, Dumper=_Dumper, allow_unicode=True, **kwargs)
    return out


def dump_all(docs: Any, **kwargs: Any) -> str:
    out: str = yaml.dump_all(docs, Dumper=_Dumper, allow_unicode=True, **kwargs)
    return out
