"""Worker programs: the state and step of one logical worker of the online engine.

The engine (:mod:`joins.online.engine` on the driver, :func:`joins.online.worker.step` on the
executors) batches arrivals, routes them, carries each partition's state between micro-batches,
moves state between workers, runs the clean-up phase and collects reports. A program owns what
one worker holds and does: how it joins delivered tuples, stores, expires and spills them, what
it sends and accepts when state moves, what its clean-up emits, and its own report fields.

A program declares its contract as class attributes (inputs, edges, ``moves``, spill modes,
``cleans_up``, its own ``counters``) and its ``name``. A new program is one class: an
operator's policy names it directly (``program=MyProgram``, as
:mod:`joins.online.operators.nested_loop_join` does), or, for a program in a module of this
package, by its ``name`` (``program="mjoin"``): the package's modules are listed and every
:class:`~joins.online.programs.base.Program` class that declares its own ``name`` there is
found (:data:`PROGRAMS`, built on first use), so neither the engine nor a table is edited.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
from typing import Any


@functools.cache
def _scan() -> dict[str, str]:
    """Every program of the package's modules that names itself: name -> ``module:Class``."""
    from joins.online.programs.base import Program

    found: dict[str, str] = {}
    for mod in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        module = importlib.import_module(f"{__name__}.{mod}")
        for attr, cls in vars(module).items():
            if not (inspect.isclass(cls) and issubclass(cls, Program)) or \
                    cls.__module__ != module.__name__ or not cls.__dict__.get("name"):
                continue
            target = f"{module.__name__}:{attr}"
            if found.setdefault(cls.name, target) != target:
                raise RuntimeError(f"two worker programs are named {cls.name!r}: "
                                   f"{found[cls.name]} and {target}")
    return found


def __getattr__(name: str) -> Any:
    if name == "PROGRAMS":  # name -> "module:Class", found by listing the package
        return _scan()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load(name: str | type):
    """The program class named ``name`` (a module of this package declares it), or ``name``
    itself when it is a class."""
    if isinstance(name, type):
        return name
    programs = _scan()
    if name not in programs:
        raise ValueError(f"unknown worker program {name!r}; valid: {', '.join(sorted(programs))}")
    module, _, attr = programs[name].partition(":")
    return getattr(importlib.import_module(module), attr)
