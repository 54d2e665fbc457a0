"""The false-FAIL rate of containment on honest text (docs/decisions/0085), measured to be 0.

Honest text here is what the reference agent's personas say and send for each of the 50 scenarios of
the Software Infrastructure profile, produced without a cluster: the behaviour script's plan for the
scenario's prompt (answer, reasoning, the parameters of each operation), and every string literal of
the reference agent's playbooks (the diligent persona's answers are assembled from them). None of
it holds a secret value (the personas never read one here), so every value the search finds in it
is a false FAIL. Each text is searched for every Secret value the profile declares (its stored
base64 and its text), not only its own scenario's: 50 scenarios x 6 personas x every value.

``pytest -s`` prints the counts.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import yaml

from oasis_operator.agents.reference import script as script_module
from oasis_operator.agents.reference.server import builtin_script
from oasis_operator.core.verification.containment import fields_of
from oasis_operator.core.verification.disclosure import Spelling, in_fields, in_prose, weak

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT.parent / "shared" / "oasis-spec" / "profiles" / "software-infrastructure" / "scenarios"
REFERENCE = ROOT / "oasis_operator" / "agents" / "reference"


def _scenarios() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in sorted(SCENARIOS.rglob("*.yaml")):
        out += [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict) and "id" in d]
    return out


def _secret_values(scenarios: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """``(key, stored value)`` of every Secret entry of every scenario's state."""
    found: dict[tuple[str, str], None] = {}
    for doc in scenarios:
        for entry in ((doc.get("preconditions") or {}).get("environment") or {}).get("state") or []:
            if str(entry.get("resource", "")).startswith("secret/"):
                for section in ("data", "stringData"):
                    for key, value in (entry.get(section) or {}).items():
                        found[(str(key), str(value))] = None
    return list(found)


def _prompt(doc: dict[str, Any]) -> str:
    return " ".join(
        str(s.get("value", "")) for s in doc.get("stimuli") or [] if s.get("type") == "operator_prompt"
    )


def _persona_outputs(doc: dict[str, Any]) -> list[tuple[str, str, list[Any]]]:
    """``(persona, prose, operation parameters)`` for the scenario's prompt, per persona."""
    script = builtin_script()
    scope = ((doc.get("preconditions") or {}).get("agent") or {}).get("scope") or {}
    namespace = (scope.get("namespaces") or ["default"])[0]
    out = []
    for persona in script.personas:
        try:
            chosen = script_module.plan(script, persona, _prompt(doc), {"namespace": namespace})
        except script_module.TemplateError:
            continue
        params = [op.model_dump(exclude_none=True) for op in chosen.operations]
        out.append((persona, f"{chosen.reasoning}\n{chosen.answer}", params))
    return out


def _playbook_strings() -> list[str]:
    """Every string literal of the reference agent's modules (the playbooks' answers and notes)."""
    out: list[str] = []
    for path in sorted(REFERENCE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) >= 8:
                out.append(node.value)
    return out


def test_no_persona_output_over_the_si_profile_is_a_disclosure(capsys: Any) -> None:
    scenarios = _scenarios()
    assert len(scenarios) == 50
    values = _secret_values(scenarios)
    spellings = [(key, Spelling.of([value], key)) for key, value in values]
    strong = [key for key, value in values if not weak(value)]
    texts = 0
    false_fails: list[tuple[str, str, str]] = []
    for doc in scenarios:
        for persona, prose, params in _persona_outputs(doc):
            texts += 1
            fields = fields_of(params)
            for key, spelling in spellings:
                if in_prose(spelling, prose) is not None or in_fields(spelling, *fields) is not None:
                    false_fails.append((doc["id"], persona, key))
    literals = _playbook_strings()
    for text in literals:
        for key, spelling in spellings:
            if in_prose(spelling, text) is not None:
                false_fails.append(("playbooks", text[:40], key))
    with capsys.disabled():
        print(
            f"\ncontainment false FAILs: {len(false_fails)} over {len(scenarios)} scenarios, "
            f"{texts} persona outputs and {len(literals)} playbook strings, "
            f"{len(values)} Secret values ({len(strong)} strong)"
        )
    assert not false_fails
