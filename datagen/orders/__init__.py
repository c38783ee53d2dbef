"""Arrival orders of online (streaming) joins: which relation the next tuple comes from.

A stream is the union of R and S plus an arrival sequence number. An *order* is one module in
this package that defines ``NAME`` (the order's name, e.g. ``"fluct"``) and ``ORDER``, a
function ``fn(n_r, n_s, rng, *, <its parameters with defaults>) -> Arrival``. Modules are
found by listing the package (:func:`discover`), so DINER's orders (sorted, partially sorted,
bursty delays) or D-CAPE's generator are one new module each and nothing else; helper modules
shared by orders start with ``_``. An order may reorder the tuples within a relation
(``Arrival.perm_r``/``perm_s``) and give event times; if it needs the key values (e.g. sorted
arrival) it declares the keyword parameters ``keys_r``/``keys_s`` and receives the key columns.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from datagen.chunks import stable_id
from datagen.errors import GeneratorError
from datagen.params import signature_params, validate_kwargs

KEY_ARGS = ("keys_r", "keys_s")


@dataclass
class Arrival:
    """``is_r[i]`` says whether arrival ``i`` is an R tuple.

    ``perm_r[j]`` is the input row of R that arrives as the j-th R tuple (None: file order);
    ``event_time[i]`` (seconds, non-decreasing) is when arrival ``i`` happens, if the order
    has a notion of time.
    """

    is_r: np.ndarray
    event_time: np.ndarray | None = None
    perm_r: np.ndarray | None = None
    perm_s: np.ndarray | None = None

    def check(self, n_r: int, n_s: int, order: str) -> Arrival:
        ok = (self.is_r.dtype == bool and self.is_r.shape == (n_r + n_s,)
              and int(self.is_r.sum()) == n_r)
        if not ok:
            raise RuntimeError(f"order {order!r} produced an arrival with wrong counts")
        if self.event_time is not None and (
            self.event_time.shape != self.is_r.shape or np.any(np.diff(self.event_time) < 0)
        ):
            raise RuntimeError(f"order {order!r} produced decreasing or misshaped event times")
        for perm, n in ((self.perm_r, n_r), (self.perm_s, n_s)):
            if perm is not None and not np.array_equal(np.sort(perm), np.arange(n)):
                raise RuntimeError(f"order {order!r} produced a within-relation order that is "
                                   "not a permutation")
        return self


def discover() -> dict[str, Callable[..., Arrival]]:
    """Order name -> order function, from every public module of this package.

    Not cached: listing a folder is cheap, and a module dropped in is seen at once. A public
    module without ``NAME``/``ORDER``, or two modules with one name, is an error, not skipped,
    so a misnamed order cannot silently vanish from ``python -m datagen list``.
    """
    found: dict[str, Callable[..., Arrival]] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        name, fn = getattr(mod, "NAME", None), getattr(mod, "ORDER", None)
        if not isinstance(name, str) or not callable(fn):
            raise GeneratorError(f"order module {mod.__name__} must define NAME (the order's "
                                 "name) and ORDER (its function)")
        if name in found:
            raise GeneratorError(f"two order modules are named {name!r}")
        found[name] = fn
    return found


def names() -> list[str]:
    return sorted(discover())


def load(order: str) -> Callable[..., Arrival]:
    found = discover()
    if order not in found:
        raise GeneratorError(f"unknown order {order!r}; valid: {', '.join(sorted(found))}")
    return found[order]


def needs_keys(order: str) -> bool:
    return _needs_keys(load(order))


def _needs_keys(fn: Callable[..., Arrival]) -> bool:
    return any(k in signature_params(fn) for k in KEY_ARGS)


def resolve(order: str, params: dict[str, Any]) -> dict[str, Any]:
    """The order's parameters validated, with defaults (the key columns are not parameters).

    The order then runs once on two empty relations, so its own range checks (e.g. fluct's
    k > 1) fail here, before a stream generates or reads any input.
    """
    return _resolve(order, load(order), params)


def _resolve(order: str, fn: Callable[..., Arrival], params: dict[str, Any]) -> dict[str, Any]:
    kw = validate_kwargs(fn, params, f"order {order!r}", reserved=KEY_ARGS)
    empty = {k: np.zeros(0, np.int64) for k in KEY_ARGS if k in signature_params(fn)}
    fn(0, 0, order_rng(0, order), **kw, **empty).check(0, 0, order)
    return kw


def order_rng(seed: int, order: str) -> np.random.Generator:
    ss = np.random.SeedSequence([int(seed), stable_id("order"), stable_id(order)])
    return np.random.Generator(np.random.PCG64(ss))


def compute_arrival(order: str, n_r: int, n_s: int, seed: int, *,
                    keys_r: np.ndarray | None = None, keys_s: np.ndarray | None = None,
                    **params: Any) -> Arrival:
    """The full arrival (interleave, within-relation orders, event times) of ``order``."""
    if n_r < 0 or n_s < 0:
        raise GeneratorError(f"relation sizes must be >= 0, got {n_r}, {n_s}")
    if seed < 0:
        raise GeneratorError(f"seed must be >= 0, got {seed}")
    fn = load(order)
    kw = _resolve(order, fn, params)
    if _needs_keys(fn):
        if keys_r is None or keys_s is None:
            raise GeneratorError(f"order {order!r} needs the key columns keys_r and keys_s")
        kw.update(keys_r=np.asarray(keys_r), keys_s=np.asarray(keys_s))
    return fn(int(n_r), int(n_s), order_rng(seed, order), **kw).check(n_r, n_s, order)


def arrival(order: str, n_r: int, n_s: int, seed: int, **kw: Any) -> np.ndarray:
    """Which relation each arrival comes from (True = R), for engines that need no files."""
    return compute_arrival(order, n_r, n_s, seed, **kw).is_r
