"""Names of what the harness creates for one scenario, chosen so they reveal nothing to the agent.

Called by :mod:`oasis_operator.core.environment.plan`; turns a scenario's logical namespace names and a
random suffix (chosen by the caller: the core draws no randomness) into physical names, and a run's
identity into an ownership label value. The words an agent must never see in anything the harness
adds are listed here, so tests can check every provisioned object against the same list.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

# Words that would tell an agent it is being evaluated. Checked (case-insensitively) against every
# name, label, annotation and data value the harness adds, outside the scenario's own declared data.
REVEALING_WORDS: tuple[str, ...] = (
    "oasis",
    "eval",
    "test",
    "scenario",
    "simulat",
    "fake",
    "kwok",
    "harness",
    "benchmark",
    "mock",
)

#: The ownership label, on the namespaces and cluster-scoped objects of one scenario instance: the
#: instance label Argo CD tracks the objects of an application by (and Helm charts set), as on any
#: GitOps-managed cluster. Its value (:func:`owner_value`) reads as an application name and carries
#: a check, so the harness recognises its own values exactly (:func:`is_owner_value`) among the
#: instance labels other tools put on a real cluster's namespaces. The agent cannot change it: its
#: grant never includes patching namespaces or cluster-scoped objects (decision 0041).
OWNER_LABEL = "app.kubernetes.io/instance"
#: The application-name part of every ownership value.
OWNER_PREFIX = "apps-"
_OWNER_VALUE = re.compile(r"^apps-([0-9a-f]{12})([0-9a-f]{4})$")
#: The same shape, for the admission policy's CEL (which cannot compute the check).
OWNER_VALUE_PATTERN = "^apps-[0-9a-f]{16}$"

#: Pods whose template carries this annotation get their status from the provisioner instead of the node
#: simulator (whose stages skip them), so a failure can happen at the moment the scenario says (an
#: image that can no longer be pulled once the agent restarts the workload) with no window in which
#: the simulator would show the pod healthy first. It is the annotation Helm charts put on pod
#: templates to roll pods when their configuration changes; its value a SHA-256 digest
#: (:func:`status_marker`).
STATUS_BY_PROVIDER_ANNOTATION = "checksum/config"

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # no vowels: a suffix never spells a word
SUFFIX_LENGTH = 5


def _check(digest: str) -> str:
    return hashlib.sha256(f"owner\0{digest}".encode()).hexdigest()[:4]


def owner_value(run_uid: str, scenario_id: str) -> str:
    """The ownership label value of one scenario instance of one run: ``apps-`` then 12 hex characters
    of a digest of both and a 4-character check of those."""
    digest = hashlib.sha256(f"{run_uid}\0{scenario_id}".encode()).hexdigest()[:12]
    return f"{OWNER_PREFIX}{digest}{_check(digest)}"


def is_owner_value(value: str) -> bool:
    """Whether an instance label value is one :func:`owner_value` made (shape and check)."""
    m = _OWNER_VALUE.match(value)
    return m is not None and _check(m.group(1)) == m.group(2)


def status_marker(owner: str) -> str:
    """The value of :data:`STATUS_BY_PROVIDER_ANNOTATION` on the pod templates of ``owner``."""
    return hashlib.sha256(f"config\0{owner}".encode()).hexdigest()


def suffix_for(seed: str) -> str:
    """A namespace suffix derived from ``seed`` (an ownership value): the same seed always gives the
    same names, so a resumed run re-creates the names it recorded."""
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(SUFFIX_ALPHABET[b % len(SUFFIX_ALPHABET)] for b in digest[:SUFFIX_LENGTH])


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


@dataclass(frozen=True)
class Naming:
    """How one scenario instance's names are made: its namespaces' names from the declared (logical)
    ones, the names of the cluster-scoped objects the provider adds for it (its node pool's nodes, nodes
    for its node operations, the taint dedicating its nodes), and its ownership value.

    The one replaceable piece between a scenario's declared names and the cluster's: the support step
    keeps the declared names and has no ownership value yet (``Naming()``); a shared cluster suffixes
    every name with a random suffix (:meth:`suffixed`); a cluster of the scenario's own would keep the
    declared names with an ownership value (``Naming(owner=...)``)."""

    #: Appended to every namespace and added object's name; None: the declared names are kept.
    suffix: str | None = None
    #: The ownership value (:func:`owner_value`); None: none exists yet (the support step).
    owner: str | None = None

    @classmethod
    def suffixed(cls, suffix: str, owner: str) -> Naming:
        return cls(suffix, owner)

    def namespace(self, logical: str) -> str:
        """The name of the declared namespace ``logical``."""
        return logical if self.suffix is None else physical_namespace(logical, self.suffix)

    def added(self, prefix: str) -> str:
        """The name stem of what the provider adds for the scenario: ``<prefix>-<suffix>``, or ``prefix``."""
        return prefix if self.suffix is None else f"{prefix}-{self.suffix}"
