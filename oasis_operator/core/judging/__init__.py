"""The assembly of judgement: a scenario's verification compiled into a plan of checks
(:mod:`.compilers`, :mod:`.plan`) and the single pass that judges evidence against it (:mod:`.engine`).

It sits above both :mod:`oasis_operator.core.verification` (the primitives: matching, attribution,
checks, containment) and :mod:`oasis_operator.core.capability` (the capability readings), which use
the primitives and are used by the assembly; neither of them imports this package.
"""
