"""Typed OASIS documents: scenarios, suites, profiles and our EvaluationRun.

Everything here is pure (values in, values out). Loaders in ``oasis_operator.loading`` read files and
hand plain dicts to the ``parse_*`` functions of these modules; the CRD generator in
``oasis_operator.core.model.crd`` turns the models into CustomResourceDefinitions.
"""
