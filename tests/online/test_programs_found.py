"""Worker programs are found by listing joins/online/programs/: each class names itself, and
the names policies and configs use resolve to the same classes as the former table did."""

from __future__ import annotations

import pytest

from joins.online import programs
from joins.online.programs.base import Program

NAMED = {  # the names operators' policies use (program="...")
    "joiner": "joins.online.programs.joiner:Joiner",
    "mjoin": "joins.online.programs.mjoin:MJoin",
    "diner": "joins.online.programs.diner:Diner",
    "hmj": "joins.online.programs.hmj:HashMerge",
    "rpj": "joins.online.programs.rpj:RateBasedProgressive",
    "xjoin": "joins.online.programs.xjoin:XJoin",
    "pmj": "joins.online.programs.pmj:ProgressiveMerge",
    "miner": "joins.online.programs.miner:Miner",
    "mjoin_flush": "joins.online.programs.miner:MJoinCoordinated",
    "dcape": "joins.online.programs.dcape:DCape",
}


def test_every_program_is_found_under_its_own_name():
    assert programs.PROGRAMS == NAMED
    for name in NAMED:
        cls = programs.load(name)
        assert issubclass(cls, Program) and cls.name == name


def test_a_class_is_its_own_program_and_an_unknown_name_lists_the_valid_ones():
    class Mine(Program):
        name = "mine"

    assert programs.load(Mine) is Mine
    with pytest.raises(ValueError, match="unknown worker program 'nope'; valid: dcape, diner"):
        programs.load("nope")

