"""The tool plane, planned: which back-end holds what of a scenario (registry) and what exactly
(plan). Pure; the adapters in ``oasis_operator.adapters.toolplane`` carry it out."""
