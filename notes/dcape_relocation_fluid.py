"""D-CAPE Figs 14-15: relocations a fluid model predicts if the 10x load followed the machine.

Not a run and not a result: the arithmetic behind the reading named in the findings of
dcape/fig14 T13-90 and dcape/fig15 T14-order. Two machines' state grows with the tuples they
receive (the loaded machine 10/11 of them, phases switching at 5, 15, 25, ... minutes); every
statistics tick the manager moves exactly (M_m - M_l)/2 when M_l/M_m < k and the last move is at
least ``span`` seconds old. Nothing expires (memory is unlimited in these figures).

    python notes/dcape_relocation_fluid.py
"""

from __future__ import annotations


def relocations(k: float, span_s: float, tick_s: float = 5.0, minutes: float = 60.0) -> int:
    state = [0.0, 0.0]
    last, moves = float("-inf"), 0
    t = 0.0
    while t < minutes * 60:
        minute = t / 60
        loaded = 0 if minute < 5 else (1 if int((minute - 5) // 10) % 2 == 0 else 0)
        state[loaded] += tick_s * 10 / 11
        state[1 - loaded] += tick_s / 11
        most, least = max(state), min(state)
        if most > 0 and least / most < k and t - last >= span_s:
            sender = state.index(most)
            state[sender] -= (most - least) / 2
            state[1 - sender] += (most - least) / 2
            last, moves = t, moves + 1
        t += tick_s
    return moves


if __name__ == "__main__":
    for span in (15.0, 30.0, 45.0):
        print(f"k = 0.9, span {span:.0f} s: {relocations(0.9, span)} relocations")
