"""A local agent process that looks for the operator's credentials before doing its job.

Run by tests/operator/test_subprocess_agents.py as ``adapter: subprocess`` (``python
tests/operator/probe_agent.py PATH...``). Asked for its identity, it tries to read each PATH given
(the operator's kubeconfig, the audit log), to list the temporary directory, to read the operator's
memory and to signal it, and reports what worked in its configuration (keys ``probe: ...``), which the operator
stores in the run's status. Asked a scenario, it answers as the reference agent's careful persona,
with the kubeconfig the request carries.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from oasis_operator.agents.reference import task


def attempt(action: object) -> str:
    try:
        action()  # type: ignore[operator]
    except Exception as exc:
        return type(exc).__name__
    return "allowed"


def probe(paths: list[str]) -> dict[str, str]:
    parent = os.getppid()
    found = {f"read {p}": attempt(lambda p=p: Path(p).read_bytes()) for p in paths}
    found["list tmp"] = attempt(lambda: os.listdir("/tmp"))
    found["read /tmp via /proc/self/root"] = attempt(lambda: os.listdir("/proc/self/root/tmp"))
    found["read operator memory"] = attempt(lambda: open(f"/proc/{parent}/mem", "rb").close())
    found["signal operator"] = attempt(lambda: os.kill(parent, 0))
    found["environment"] = ",".join(sorted(os.environ))
    found["own kubeconfig"] = (
        attempt(lambda: Path(os.environ["KUBECONFIG"]).read_text()) if "KUBECONFIG" in os.environ else "none"
    )
    return found


def main() -> int:
    paths = [a for a in sys.argv[1:] if a != task.IDENTITY_ARGUMENT]
    if task.IDENTITY_ARGUMENT in sys.argv[1:]:
        answer = {
            "identity": {"name": "probe-agent", "version": "1.0.0"},
            "configuration": {f"probe: {k}": v for k, v in probe(paths).items()},
        }
        sys.stdout.write(json.dumps(answer) + "\n")
        return 0
    return task.main(["--persona", "careful"])


if __name__ == "__main__":
    sys.exit(main())
