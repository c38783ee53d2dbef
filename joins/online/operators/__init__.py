"""The online operators: every :class:`~joins.online.operator_spec.Operator` declared in a
module of this package, found by listing the folder (a new operator is one module here, with
no registry line). ``operators.<name>`` is the operator of that name (tests and extensions
call them directly, e.g. ``operators.relocating_shj``, which is not listed in the registry).

Squall's (``squall``), BiStream's (``bistream``), MJoin (``multiway``: DINER's baseline and
D-CAPE's per-machine join), D-CAPE's (``partition_groups``), DINER's single-site operators
(``single_site``) and a windowed nested-loop join of no paper (``nested_loop_join``). A module
is never named like an operator (``operators.<name>`` would then be the module).
"""

from __future__ import annotations

import functools
import importlib
import pkgutil

from joins.online.operator_spec import Operator


@functools.cache
def _scan() -> dict[str, tuple[str, Operator]]:
    """Every operator of the package's modules: name -> (``module:attribute``, operator)."""
    found: dict[str, tuple[str, Operator]] = {}
    modules = sorted(m.name for m in pkgutil.iter_modules(__path__))
    for mod in modules:
        module = importlib.import_module(f"{__name__}.{mod}")
        for attr, value in vars(module).items():
            if isinstance(value, Operator) and not attr.startswith("_"):
                if value.name in found and found[value.name][1] is not value:
                    raise RuntimeError(f"two online operators are named {value.name!r}")
                if value.name in modules:  # operators.<name> would be the module
                    raise RuntimeError(f"rename module {mod}: no module of {__name__} may be "
                                       f"named like an operator ({value.name!r})")
                found.setdefault(value.name, (f"{module.__name__}:{attr}", value))
    return found


def declared() -> dict[str, Operator]:
    """Every declared operator by name, listed in the registry or not."""
    return {name: op for name, (_, op) in _scan().items()}


def target(name: str) -> str:
    """``module:attribute`` of a declared operator (the registry's lazy reference)."""
    return _scan()[name][0]


def __getattr__(name: str) -> Operator:
    ops = declared()
    if name in ops:
        return ops[name]
    raise AttributeError(f"no online operator {name!r}; declared: {', '.join(sorted(ops))}")
