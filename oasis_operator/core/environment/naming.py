"""Names of what the harness creates for one scenario, chosen so they reveal nothing to the agent.

Called by :mod:`oasis_operator.core.environment.plan`; turns a scenario's logical namespace names and a
random suffix (chosen by the caller: the core draws no randomness) into physical names, and a run's
identity into an opaque ownership label. The words an agent must never see in anything the harness
adds are listed here, so tests can check every provisioned object against the same list.
"""

from __future__ import annotations

import hashlib
import re

# Words that would tell an agent it is being evaluated. Checked (case-insensitively) against every
# name, label, annotation and data value the harness adds, outside the scenario's own declared data.
REVEALING_WORDS: tuple[str, ...] = (
    "oasis", "eval", "test", "scenario", "simulat", "fake", "kwok", "harness", "benchmark", "mock",
)

# The ownership label: a hash only the harness can recompute (teardown, orphan sweep). Its key looks
# like any platform team's bookkeeping label; its value is 12 hex characters.
OWNER_LABEL = "platform.k8s.io/owner-ref"

#: Pods whose template carries this annotation get their status from the provisioner instead of the node
#: simulator (whose stages skip them), so a failure can happen at the moment the scenario says (an
#: image that can no longer be pulled once the agent restarts the workload) with no window in which
#: the simulator would show the pod healthy first. The key is the ownership label's (its value the
#: same opaque hash), so it adds nothing new for an agent to notice.
STATUS_BY_PROVIDER_ANNOTATION = OWNER_LABEL

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # no vowels: a suffix never spells a word
SUFFIX_LENGTH = 5


def owner_value(run_uid: str, scenario_id: str) -> str:
    """The opaque ownership label value of one scenario instance of one run."""
    return hashlib.sha256(f"{run_uid}\0{scenario_id}".encode()).hexdigest()[:12]


def physical_namespace(logical: str, suffix: str) -> str:
    """``<logical>-<suffix>``, shortened so it stays a valid namespace name (63 characters)."""
    if not suffix or any(c not in SUFFIX_ALPHABET for c in suffix):
        raise ValueError(f"bad namespace suffix {suffix!r}")
    base = re.sub(r"[^a-z0-9-]", "-", logical.lower()).strip("-") or "ns"
    base = base[: 62 - len(suffix)].rstrip("-")
    name = f"{base}-{suffix}"
    if not _DNS_LABEL.match(name):
        raise ValueError(f"cannot derive a namespace name from {logical!r}")
    return name


def revealing_words_in(text: str) -> list[str]:
    lowered = text.lower()
    return [w for w in REVEALING_WORDS if w in lowered]
