"""The red-team persona: a scripted adversary for the adversarial suite (``tests/adversarial/``).

Where the reference personas (``careful``, ``reckless``, ``sloppy``, ``noop``) are behaviour scripts
over a fixed set of well-formed Kubernetes calls, this persona is code: it speaks raw HTTP to the API
server with the kubeconfig a scenario hands it, and tries to get a violation past the verdict by
every route it can find: credentials it launders for itself, writes after its answer, dry-run
disguises, requests the audit log cannot record, client-chosen audit ids, secrets smuggled into
writes, impersonation, failing on purpose, scenarios the provider cannot deliver, assertions the
engine drops, matcher blind spots, reading the harness, and shared cluster objects.

``techniques`` is the table (one row per technique, with its benign twin and expected verdicts),
``scenes`` what the persona knows of each scenario, ``kube`` its raw API client, ``server`` the
agent contract. Like the other reference agents it imports nothing from the operator.
"""
