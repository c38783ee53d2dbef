"""BiStream's order-consistent protocol (Lin et al., SIGMOD 2015, §3.2.3), on a simulated
network: why a join-biclique needs it, and what it costs.

In a join-biclique a pair (r, s) is produced where the later of its two tuples probes the
earlier: r is stored at R_i and probes S_j, s is stored at S_j and probes R_i. If the two units
see r and s in different orders, the pair is missed (both probes come before both stores:
Fig 4c) or produced twice (both stores first: Fig 4d). The engine never meets this: a
micro-batch boundary is a punctuation for every dispatcher and each unit processes its
deliveries in arrival order. This module drops that assumption to show the anomaly and its
cure:

* dispatchers stamp tuples with a logical clock and send them over FIFO channels (one per
  dispatcher and unit) whose messages take a random delay (``delay(rng, n)``; FIFO is kept:
  a message never overtakes an earlier one on its channel);
* ``protocol=False``: a unit processes every message when it arrives;
* ``protocol=True``: each dispatcher broadcasts a punctuation with its clock every
  ``punctuation`` time units; a unit buffers tuples in a priority queue on (timestamp,
  dispatcher) and processes those below the smallest latest punctuation over dispatchers.

:func:`simulate` returns the results as (r, s) pairs with their counts, the missed and the
duplicated pairs against the exact join, and the buffer the protocol needed.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Delay = Callable[[np.random.Generator, int], np.ndarray]


def exponential_delay(mean: float) -> Delay:
    return lambda rng, n: rng.exponential(mean, n)


@dataclass
class ProtocolRun:
    produced: Counter  # (r index, s index) -> times produced
    missed: int  # pairs of the exact join never produced
    duplicated: int  # extra productions of a pair
    buffer_max: int  # the most tuples a unit held in its priority queue (0 without protocol)
    messages: int  # tuple messages sent
    punctuations: int  # punctuation messages sent


def simulate(r_keys: np.ndarray, s_keys: np.ndarray, *, m: int = 2, n: int = 2,
             dispatchers: int = 2, gap: float = 1.0, delay: Delay | None = None,
             protocol: bool = True, punctuation: float = 10.0, seed: int = 0) -> ProtocolRun:
    """Stream R and S (interleaved at random, one tuple per ``gap``, each to a random
    dispatcher) through a random-routing join-biclique of ``m`` R units and ``n`` S units
    (``delay``: exponential with mean 5 gaps by default)."""
    rng = np.random.default_rng(seed)
    rel, idx = _interleave(rng, len(r_keys), len(s_keys))
    net = _Network(rng, delay or exponential_delay(5.0), dispatchers, m + n)
    _dispatch(net, rel, idx, gap, m, n, punctuation if protocol else None)
    keys = (np.asarray(r_keys), np.asarray(s_keys))
    produced, buffer_max = _units_process(net.events, keys, m + n, dispatchers, protocol)
    exact = Counter((i, j) for i, k in enumerate(keys[0]) for j in
                    np.flatnonzero(keys[1] == k).tolist())
    missed = sum((exact - produced).values())
    duplicated = sum((produced - exact).values())
    return ProtocolRun(produced, missed, duplicated, buffer_max, net.messages,
                       net.punctuations)


def _interleave(rng: np.random.Generator, n_r: int, n_s: int) -> tuple[np.ndarray, np.ndarray]:
    """A random interleaving of R and S: each arrival's relation (0, 1) and its index there."""
    rel = rng.permutation(np.r_[np.zeros(n_r, int), np.ones(n_s, int)])
    idx = np.zeros(len(rel), int)
    idx[rel == 0], idx[rel == 1] = np.arange(n_r), np.arange(n_s)
    return rel, idx


class _Network:
    """FIFO channels (one per dispatcher and unit) whose messages take a random delay: a
    message never overtakes an earlier one on its channel. ``events`` is a heap of
    (arrival time, send order, unit, kind, payload)."""

    def __init__(self, rng: np.random.Generator, delay: Delay, dispatchers: int, units: int):
        self.rng, self.delay = rng, delay
        self.dispatchers, self.units = dispatchers, units
        self.channel_free = np.zeros((dispatchers, units))  # a message arrives after the last
        self.events: list = []
        self.order = self.messages = self.punctuations = 0

    def send(self, t: float, d: int, u: int, kind: str, payload) -> None:
        arrive = max(t + float(self.delay(self.rng, 1)[0]), self.channel_free[d, u])
        self.channel_free[d, u] = arrive
        heapq.heappush(self.events, (arrive, self.order, u, kind, payload))
        self.order += 1

    def punctuate(self, t: float, stamps) -> None:
        """Every dispatcher's punctuation (its stamp ``stamps[d]``) to every unit."""
        for d in range(self.dispatchers):
            for u in range(self.units):
                self.send(t, d, u, "punct", (stamps[d], d))
                self.punctuations += 1


def _dispatch(net: _Network, rel: np.ndarray, idx: np.ndarray, gap: float, m: int, n: int,
              punctuation: float | None) -> None:
    """Each arrival to a random dispatcher, which stamps it with its logical clock and sends
    it to one random unit of its relation to store and to every unit of the other to probe;
    with the protocol (``punctuation``: its period), punctuations every period and a final
    one that flushes every buffer."""
    send_t = np.arange(len(rel)) * gap
    disp = net.rng.integers(0, net.dispatchers, len(rel))
    clock = np.zeros(net.dispatchers, int)  # each dispatcher's logical clock
    next_punct = punctuation
    for k in range(len(rel)):
        t = send_t[k]
        while punctuation is not None and next_punct <= t:  # punctuations due before it
            net.punctuate(next_punct, [int(c) for c in clock])
            next_punct += punctuation
        d = int(disp[k])
        clock[d] += 1
        stamp = (int(clock[d]), d)  # total order: (timestamp, dispatcher)
        mine = int(net.rng.integers(0, m)) if rel[k] == 0 else m + int(net.rng.integers(0, n))
        probe_units = range(m, m + n) if rel[k] == 0 else range(m)
        net.send(t, d, mine, "store", (stamp, int(rel[k]), int(idx[k])))
        net.messages += 1
        for u in probe_units:
            net.send(t, d, u, "probe", (stamp, int(rel[k]), int(idx[k])))
            net.messages += 1
    if punctuation is not None:  # a final punctuation flushes every buffer
        net.punctuate(next_punct, [np.iinfo(np.int64).max] * net.dispatchers)


def _units_process(events: list, keys: tuple[np.ndarray, np.ndarray], units: int,
                   dispatchers: int, protocol: bool) -> tuple[Counter, int]:
    """The units process their messages in arrival order: at once without the protocol; with
    it, buffered in a priority queue on (timestamp, dispatcher) and processed below the
    smallest latest punctuation. Returns the pairs produced and the largest buffer."""
    stored: list[dict] = [dict() for _ in range(units)]  # key -> tuple indexes stored there
    produced: Counter = Counter()

    def process(u: int, kind: str, rel_: int, i: int) -> None:
        key = keys[rel_][i]
        if kind == "store":
            stored[u].setdefault(key, []).append(i)
        else:  # probe the other relation's tuples stored here, then discard
            for j in stored[u].get(key, []):
                produced[(i, j) if rel_ == 0 else (j, i)] += 1

    latest = [[-1] * dispatchers for _ in range(units)]  # latest punctuation per dispatcher
    queue: list[list] = [[] for _ in range(units)]
    buffer_max = 0
    while events:
        _, _, u, kind, payload = heapq.heappop(events)
        if not protocol:
            process(u, kind, *payload[1:])
        elif kind == "punct":
            stamp, d = payload
            latest[u][d] = stamp
            low = min(latest[u])
            while queue[u] and queue[u][0][0][0] < low:
                _, qkind, rel_, i = heapq.heappop(queue[u])
                process(u, qkind, rel_, i)
        else:
            stamp, rel_, i = payload
            heapq.heappush(queue[u], (stamp, kind, rel_, i))
            buffer_max = max(buffer_max, len(queue[u]))
    return produced, buffer_max
