"""What a run asks of its layout, program and policy, checked once before any step runs.

The API (:func:`joins.online.run_stream`) and the stream CLI (before it starts Spark) call the
same functions, so a combination the engine cannot run is refused in one line by both: the
number of inputs a layout routes and a program joins, a join on several attributes, the spill
modes a program supports, a predicate the routing cannot meet, and a ``rescale=`` schedule,
which is dry-run here on the layout: every change must be one the layout can make and the
program can move (its ``moves``).
"""

from __future__ import annotations

from functools import partial

import numpy as np

from joins.online.controller import Policy, Scripted, Static
from joins.online.kernel import Equi


def _units(units) -> tuple[int, ...]:
    """A rescale point's units: an int where the layout has one unit count, else a tuple."""
    return (int(units),) if np.isscalar(units) else tuple(int(u) for u in units)


def _rescale(layout, units: tuple[int, ...]):
    return layout.rescale(units)


def _static(policy: Policy) -> None:
    if type(policy) is not Static:
        raise ValueError("rescale= changes the units of a static operator by hand; this "
                         "operator's controller decides its own layout")


def rescaled(policy: Policy, rescale: list | None) -> Policy:
    """A static operator whose units change at given arrival numbers (``rescale=``: a list of
    (arrival number, units)), or the policy itself without a schedule."""
    if not rescale:
        return policy
    _static(policy)
    changes = [(int(at), partial(_rescale, units=_units(units))) for at, units in rescale]
    scripted = Scripted(policy.layout, changes)
    scripted.program = policy.program
    scripted.program_params = dict(policy.program_params)
    return scripted


def check_schedule(policy: Policy, program, rescale: list | None) -> None:
    """Dry-run a ``rescale=`` schedule: each layout it reaches must exist and be one the
    program can move to (the layout's move mode among the program's ``moves``)."""
    if not rescale:
        return
    _static(policy)
    if not program.moves:
        raise ValueError(f"the {program.name} program never moves state (it runs on one "
                         "site), so its units cannot be rescaled")
    layout = policy.layout
    for at, units in sorted(rescale, key=lambda c: int(c[0])):
        layout = layout.rescale(_units(units))
        if layout.move_mode not in program.moves:
            raise ValueError(f"rescale at {at}: a {layout.kind} layout moves state by "
                             f"{layout.move_mode}, which the {program.name} program does not "
                             f"support (its moves: {', '.join(program.moves)})")


def check_run(policy: Policy, program, *, operator: str, inputs: int, shared: bool,
              spill: str, predicate=None, rescale: list | None = None) -> None:
    """Everything about the operator's layout and program that the inputs' data does not
    decide; raises ValueError with one line."""
    most = policy.layout.max_inputs
    if most is not None and inputs > most:
        raise ValueError(f"operator {operator!r} routes with a {policy.layout.kind} layout, "
                         f"which has {most} sides; {inputs} inputs need a hash or "
                         "one-site layout (e.g. operator=mjoin)")
    if program.inputs is not None and program.inputs != inputs:
        raise ValueError(f"operator {operator!r} joins {program.inputs} inputs, got "
                         f"{inputs}; use mjoin for more")
    if not shared and not program.edges:
        raise ValueError(f"operator {operator!r} joins on one shared attribute; a join on "
                         "several attributes (edges) needs an operator whose program "
                         "takes edges, e.g. operator=mjoin")
    if spill not in program.spill_modes:
        raise ValueError(f"the {program.name} program supports spill="
                         f"{'|'.join(program.spill_modes)}, not {spill!r}")
    if predicate is not None and not isinstance(predicate, Equi):
        from joins.online.layouts import ContRandLayout

        if isinstance(policy.layout, ContRandLayout):
            raise ValueError("ContRand routes equi-joins (hash subgroups) and band joins "
                             "(band=, range subgroups); another predicate needs random routing")
        if policy.layout.kind == "hash":
            raise ValueError(f"a {predicate.name} predicate needs content-insensitive routing "
                             "(grid or biclique); hash routing only meets equal keys")
    check_schedule(policy, program, rescale)
