"""A small pure-Python DINER arriving phase (Algs 1-3 with the choices written in
:mod:`joins.online.programs.diner`), tuple by tuple over plain lists, to check the program's
flushes against: no numpy index, no virtual clock, no reactive phase (arrivals never wait)."""

from __future__ import annotations

import math

import numpy as np

UP, LW, MD = 0, 1, 2


class Reference:
    def __init__(self, budget: int, block: int, seed: int = 0) -> None:
        self.budget, self.block, self.seed = budget, block, seed
        self.mem = [[], []]  # per relation: [key, ats, tid, bit] sorted on (key, ats)
        self.joins = [[0, 0, 0], [0, 0, 0]]
        self.lw, self.up = [-math.inf, -math.inf], [math.inf, math.inf]
        self.hand = [None, None]
        self.events = 0
        self.flushed = [0, 0, 0]  # tuples flushed from Up, Lw, Md
        self.outputs = 0

    def region(self, rel: int, key: float) -> int:
        return UP if key >= self.up[rel] else LW if key <= self.lw[rel] else MD

    def arrive(self, rel: int, key: float) -> None:
        self.events += 1
        if key is None or (isinstance(key, float) and math.isnan(key)):
            return
        matched = [t for t in self.mem[1 - rel] if t[0] == key]
        for t in matched:
            t[3] = True
        self.outputs += len(matched)
        self.joins[rel][self.region(rel, key)] += len(matched)
        for t in matched:
            self.joins[1 - rel][self.region(1 - rel, t[0])] += 1
        while len(self.mem[0]) + len(self.mem[1]) + 1 > self.budget and \
                len(self.mem[0]) + len(self.mem[1]):
            self.flush()
        mem = self.mem[rel]
        pos = sum(1 for t in mem if t[0] <= key)
        mem.insert(pos, [key, self.events, 0, bool(matched)])

    def flush(self) -> None:
        rel = 0 if len(self.mem[0]) >= len(self.mem[1]) else 1
        mem = self.mem[rel]
        regions = [[t for t in mem if self.region(rel, t[0]) == r] for r in (UP, LW, MD)]
        tups = [len(g) for g in regions]
        benefit = [self.joins[rel][r] / tups[r] if tups[r] else math.inf for r in range(3)]
        first = self.lw[rel] == -math.inf and self.up[rel] == math.inf
        need, taken, which = self.block, [], set()
        for r in sorted(range(3), key=lambda r: (benefit[r], r)):
            if need == 0 or not tups[r]:
                continue
            if r == UP:
                got = regions[UP][-need:]
            elif r == LW:
                got = regions[LW][:need]
            else:
                got = self.clock(rel, regions[MD], need)
            taken += got
            need -= len(got)
            self.flushed[r] += len(got)
            if got:
                which.add(r)
        ids = {id(t) for t in taken}
        self.mem[rel] = [t for t in mem if id(t) not in ids]
        self.joins[rel] = [0, 0, 0]
        self.bounds(rel, {UP, LW} if first else which)

    def clock(self, rel: int, md: list, need: int) -> list:
        if self.hand[rel] is None:
            start = int(np.random.default_rng(self.seed + rel).integers(len(md)))
        else:
            start = next((i for i, t in enumerate(md) if (t[0], t[1]) >= self.hand[rel]),
                         len(md)) % len(md)
        order = md[start:] + md[:start]
        chosen, stop = [], len(order)
        for i, t in enumerate(order):  # first pass: zeros go, ones are cleared
            if not t[3]:
                chosen.append(t)
                if len(chosen) == need:
                    stop = i + 1
                    break
            else:
                t[3] = False
        if len(chosen) < need:  # second pass: in order, among the rest
            rest = [(i, t) for i, t in enumerate(order) if not any(t is c for c in chosen)]
            more = rest[:need - len(chosen)]
            chosen += [t for _, t in more]
            stop = more[-1][0] + 1 if more else len(order)
        self.hand[rel] = (order[stop][0], order[stop][1]) if stop < len(order) else None
        return chosen

    def bounds(self, rel: int, which: set) -> None:
        keys = [t[0] for t in self.mem[rel]]
        if len(keys) < 2 * self.block:
            self.lw[rel], self.up[rel] = -math.inf, math.inf
            return
        if UP in which:
            self.up[rel] = keys[len(keys) - self.block]
        if LW in which:
            self.lw[rel] = keys[self.block - 1]
        if self.lw[rel] >= self.up[rel]:
            below = [k for k in keys if k < self.up[rel]]
            self.lw[rel] = below[-1] if below else -math.inf
