"""Counting equal-key pairs under a per-pair condition without listing them.

The single-site operators' disk joins meet billions of pairs at high skew (DINER's Zipf s >= 2
runs: one key holds most tuples), so when rows are not collected they count: all equal-key
pairs, less those the condition excludes, each a count over keys made sortable together with a
second integer (the key's rank times a bound, plus the integer).
"""

from __future__ import annotations

import numpy as np


def _ranks(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Integer ranks of two key arrays over their common sorted values."""
    _, inv = np.unique(np.concatenate([a, b]), return_inverse=True)
    return inv[:len(a)].astype(np.int64), inv[len(a):].astype(np.int64)


def _count_le(composite_sorted: np.ndarray, q: np.ndarray) -> np.ndarray:
    return np.searchsorted(composite_sorted, q, "right")


def pairs_not_met(ka: np.ndarray, ats_a: np.ndarray, dts_a: np.ndarray, kb: np.ndarray,
                  ats_b: np.ndarray, dts_b: np.ndarray) -> int:
    """Equal-key pairs (a, b) whose [ATS, DTS] intervals do not overlap (DINER's duplicate
    check: overlapping tuples met in memory): :func:`pairs_not_produced` with no reactive
    pass."""
    none_a, none_b = np.full(len(ka), -1, np.int64), np.full(len(kb), -1, np.int64)
    return pairs_not_produced(ka, ats_a, dts_a, none_a, kb, ats_b, dts_b, none_b)


class NotMet:
    """:func:`pairs_not_met` of many ``a`` sides against one fixed ``b`` side (DINER's outer
    batch, joined with one inner block after another): b's keys and its (key, DTS) and
    (key, ATS) orders are sorted once; each count is a few binary searches of a's tuples."""

    def __init__(self, kb: np.ndarray, ats_b: np.ndarray, dts_b: np.ndarray) -> None:
        keys, rb, per_key = np.unique(kb, return_inverse=True, return_counts=True)
        self.n_keys = len(keys)
        self.keys = np.append(keys, np.nan)  # a key b lacks gets rank n_keys (no tuple)
        self.per_key = np.append(per_key, 0).astype(np.int64)
        self.top = int(max(ats_b.max(), dts_b.max())) if len(kb) else 0  # b's latest time
        self.bound = self.top + 2
        rb = rb.astype(np.int64).reshape(-1) * self.bound
        self.by_dts, self.by_ats = np.sort(rb + dts_b), np.sort(rb + ats_b)

    def each(self, ka: np.ndarray, ats_a: np.ndarray, dts_a: np.ndarray) -> np.ndarray:
        """Per a (times >= 0): the b of its key that left before it arrived, plus those that
        arrived after it left (the b of smaller keys, counted in both searches, cancel)."""
        ra = self.keys[:-1].searchsorted(ka)
        ra = np.where(self.keys[ra] == ka, ra, self.n_keys)
        base = ra * self.bound  # b's times are at most top: a's are clipped to it
        return (self.by_dts.searchsorted(base + np.minimum(ats_a - 1, self.top), "right") -
                self.by_ats.searchsorted(base + np.minimum(dts_a, self.top), "right") +
                self.per_key[ra])

    def count(self, ka: np.ndarray, ats_a: np.ndarray, dts_a: np.ndarray) -> int:
        """``pairs_not_met(ka, ats_a, dts_a, kb, ats_b, dts_b)``."""
        return int(self.each(ka, ats_a, dts_a).sum()) if len(ka) and self.n_keys else 0


def pairs_not_produced(ka: np.ndarray, ats_a: np.ndarray, dts_a: np.ndarray, last_a: np.ndarray,
                       kb: np.ndarray, ats_b: np.ndarray, dts_b: np.ndarray,
                       last_b: np.ndarray) -> int:
    """Equal-key pairs (a, b) that neither met in memory nor met in a reactive pass (XJoin's
    and RPJ's duplicate check; timestamps are event numbers >= 0, ``last`` -1 for no pass).

    b left memory before a arrived (``dts_b < ats_a``) and a's latest pass against b's disk
    (``last_a``) came before b left, or the same with the roles swapped; the two cases exclude
    each other, so the count is two sums of per-a range counts over b's (key rank, DTS)."""
    if not len(ka) or not len(kb):
        return 0
    ra, rb = _ranks(ka, kb)
    return pairs_not_produced_ranked(ra, ats_a, dts_a, last_a, rb, ats_b, dts_b, last_b)


def pairs_not_produced_ranked(ra: np.ndarray, ats_a: np.ndarray, dts_a: np.ndarray,
                              last_a: np.ndarray, rb: np.ndarray, ats_b: np.ndarray,
                              dts_b: np.ndarray, last_b: np.ndarray) -> int:
    """:func:`pairs_not_produced` of keys given as integer ranks >= 0 (equal keys, equal
    ranks; both sides non-empty)."""
    bound = int(max(ats_a.max(), dts_a.max(), ats_b.max(), dts_b.max())) + 2
    by_dts_b = np.sort(rb * bound + dts_b)
    by_dts_a = np.sort(ra * bound + dts_a)
    base_a, base_b = ra * bound, rb * bound
    b_left_first = (_count_le(by_dts_b, base_a + ats_a - 1) -
                    _count_le(by_dts_b, base_a + np.maximum(last_a, -1)))
    a_left_first = (_count_le(by_dts_a, base_b + ats_b - 1) -
                    _count_le(by_dts_a, base_b + np.maximum(last_b, -1)))
    return int(np.maximum(b_left_first, 0).sum() + np.maximum(a_left_first, 0).sum())


def pairs_across_groups(ka: np.ndarray, ga: np.ndarray, kb: np.ndarray, gb: np.ndarray,
                        width: float = 0.0) -> int:
    """Pairs (a, b) with ``|ka - kb| <= width`` from different groups (HMJ's and PMJ's
    segments: one segment's tuples met in memory): all pairs less each group's own. ``kb``
    need not be sorted; groups are few (a merge's fan-in)."""
    if not len(ka) or not len(kb):
        return 0

    def within(a: np.ndarray, b: np.ndarray) -> int:
        b = np.sort(b)
        return int((np.searchsorted(b, a + width, "right") -
                    np.searchsorted(b, a - width, "left")).sum())

    return within(ka, kb) - sum(within(ka[ga == g], kb[gb == g]) for g in np.unique(ga))
