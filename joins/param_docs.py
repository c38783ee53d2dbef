"""The papers algorithms come from and what each parameter (``param.<name>=``) means
(``python -m joins describe``). Every algorithm declares its parameters' meanings and defaults
itself (:class:`joins.declarations.Param`): an online operator in its
:class:`~joins.online.operator_spec.Operator`, a batch algorithm in its
:class:`~joins.declarations.BatchAlgorithm`; :data:`PARAM_DOCS` (the batch parameters'
meanings) is derived from them. tests/test_cli_checks.py checks that every parameter has a
meaning and that a batch algorithm's declared defaults are its code's."""

from __future__ import annotations

# the papers an algorithm comes from (the registry's short names; None: an algorithm of none)
PAPERS: dict[str, str] = {
    "amjoin": "Metwally, Scaling and Load-Balancing Equi-Joins (AM-Join), extended version",
    "squall": "Elseidy et al., Scalable and Adaptive Online Joins, PVLDB 7(6), 2014",
    "bistream": "Lin et al., Scalable Distributed Stream Join Processing, SIGMOD 2015",
    "diner": "Bornea et al., Adaptive Join Operators for Result Rate Optimization on Streaming "
             "Inputs, IEEE TKDE",
    "dcape": "Liu, Rundensteiner, Adapting State-Intensive Non-Blocking Queries over "
             "Distributed Environments, WPI-CS-TR-05-04, 2005",
}

def _batch_docs() -> dict[str, str]:
    """Every batch parameter's meaning, from the algorithms' declarations (a name that two
    algorithms read has one meaning: they declare the same :class:`~joins.declarations.Param`)."""
    from joins import batch

    docs: dict[str, str] = {}
    for algo in batch.declared().values():
        for name, param in algo.params.items():
            if docs.setdefault(name, param.meaning) != param.meaning:
                raise RuntimeError(f"batch parameter {name!r} has two meanings")
    return docs


def __getattr__(name: str):
    if name == "PARAM_DOCS":  # the batch parameters' meanings, built on first use
        return _batch_docs()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def meaning(algo, name: str) -> str | None:
    """What parameter ``name`` of ``algo`` (a :class:`joins.registry.Algorithm`) means, as
    the algorithm declares it."""
    param = algo.declaration().params.get(name)
    return param.meaning if param is not None else None
