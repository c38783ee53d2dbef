"""Worker programs: the state and step of one logical worker of the online engine.

The engine (:mod:`joins.online.engine` on the driver, :func:`joins.online.worker.step` on the
executors) batches arrivals, routes them, carries each partition's state between micro-batches,
moves state between workers, runs the clean-up phase and collects reports. A program owns what
one worker holds and does: how it joins delivered tuples, stores, expires and spills them, what
it sends and accepts when state moves, what its clean-up emits, and its own report fields.

A program declares its contract as class attributes (inputs, edges, ``moves``, spill modes,
``cleans_up``, its own ``counters``). A new program is one class: an operator's policy names it
directly (``program=MyProgram``, as :mod:`joins.online.operators.nested_loop_join` does), or by a
name in :data:`PROGRAMS`; the engine is not edited.
"""

from __future__ import annotations

import importlib

PROGRAMS: dict[str, str] = {
    "joiner": "joins.online.programs.joiner:Joiner",  # Squall's joiner (two inputs)
    "mjoin": "joins.online.programs.mjoin:MJoin",  # n-way symmetric hash join
    "diner": "joins.online.programs.diner:Diner",  # DINER: memory-bounded, reactive phase
    "hmj": "joins.online.programs.hmj:HashMerge",  # Hash-Merge Join (DINER's baseline)
    "rpj": "joins.online.programs.rpj:RateBasedProgressive",  # RPJ (DINER's baseline)
    "xjoin": "joins.online.programs.xjoin:XJoin",  # XJoin (DINER's baseline)
    "pmj": "joins.online.programs.pmj:ProgressiveMerge",  # PMJ (DINER's band-join baseline)
    "miner": "joins.online.programs.miner:Miner",  # MINER: DINER for chain/star/snowflake joins
    "mjoin_flush": "joins.online.programs.miner:MJoinCoordinated",  # MJoin, coordinated flush
    "dcape": "joins.online.programs.dcape:DCape",  # D-CAPE's machine: groups, spill, moves
}


def load(name: str | type):
    """The program class registered under ``name``, or ``name`` itself when it is a class."""
    if isinstance(name, type):
        return name
    if name not in PROGRAMS:
        raise ValueError(f"unknown worker program {name!r}; valid: {', '.join(sorted(PROGRAMS))}")
    module, _, attr = PROGRAMS[name].partition(":")
    return getattr(importlib.import_module(module), attr)
