"""The contract between the engine and a worker program."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from joins.online.kernel import ProbeResult


def commit_file(path: str, write: Callable[[str], None]) -> None:
    """Write a task's file so that it is committed once per task, not once per attempt.

    ``path`` must be the task's one name (a function of step, partition, worker): a retried
    or recomputed attempt replaces the file, never adds a second one. ``write(tmp)`` writes
    it under a name of this attempt's own, hidden (a leading "."; Spark and pyarrow readers
    skip such files), and an atomic rename publishes it whole: a failed or killed attempt
    leaves at most a hidden partial file, and concurrent attempts never write into one file.
    """
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, f".{name}.{uuid.uuid4().hex}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


@dataclass
class Context:
    """What a program sees of the run and of the current tick (constant within a call)."""

    config: Any  # the run's RunConfig
    batch: int = 0  # the tick (micro-batch) being processed
    watermark: float = float("-inf")  # event time no later tuple can precede
    last_seq: int = -1  # sequence number of the tick's last tuple


@dataclass
class Piece:
    """State a worker hands to another (a move, or the clean-up's gathering of disk pieces)."""

    dest: int
    rel: int
    tuples: Any  # the program's own representation
    start: int = -1  # epoch start of a rejoin move (-1: handoff, the receiver only stores)
    evicted_after: Any = None  # clean-up pieces: per-tuple eviction points


@dataclass
class WorkerBase:
    """Fields every program's worker state has; programs subclass it."""

    wid: int
    outbox: dict[int, list] = field(default_factory=dict)  # dest -> per-input stores to send
    pending: int = 0  # tuples that left the index but are held until the move finalises
    start: int = -1  # epoch start of the running rejoin move (-1: none)
    handoff: bool = False  # the running move hands tuples over (they stay indexed until sent)
    output_log: list = field(default_factory=list)  # files of produced pairs (RunConfig.cleanup_log)


class Program:
    """A worker program. Methods receive the worker's state ``ws``, the tick's context, the
    worker's counters ``c`` (a dict of exact counts: the engine's and the program's declared
    ``counters``) and its
    output collector ``out`` (a :class:`ProbeResult`: result count, and tid tuples when the
    run collects rows). Programs are pickled with the run's config: keep them small."""

    name = ""
    inputs: int | None = 2  # how many inputs the program joins (None: any)
    edges: bool = False  # joins on several attributes (a graph of edges), not one shared key
    moves: tuple[str, ...] = ("rejoin", "handoff", "boundary")  # move modes it supports
    spill_modes: tuple[str, ...] = ("charge",)
    uses_disk: bool = False  # writes files whatever the spill mode (the run gives it a folder)
    cleans_up: bool = False  # the engine runs the clean-up phase after the stream
    # its own counts beyond the engine's: each starts at 0 on every tick of every worker, so
    # its column is 0 (not missing) where it counted nothing
    counters: tuple[str, ...] = ()

    def new_worker(self, wid: int) -> WorkerBase:
        raise NotImplementedError

    def deliver(self, ws, d, ctx: Context, c: dict, out: ProbeResult) -> None:
        """Join newly delivered tuples (roles say which to store and which probe) and store."""
        raise NotImplementedError

    def receive(self, ws, piece: Piece, ctx: Context, c: dict, out: ProbeResult) -> int:
        """Accept moved tuples; returns how many arrived."""
        raise NotImplementedError

    def begin_move(self, ws, old, new, start: int, mode: str) -> None:
        """Fill ``ws.outbox`` with what leaves (and, in rejoin mode, drop it from the index)."""
        raise NotImplementedError

    def take(self, ws, dest: int, rel: int, k: int) -> Any:
        """The next ``k`` tuples of input ``rel`` for ``dest`` out of the outbox (in handoff
        mode also out of the index); fewer when fewer are left (expired or evicted)."""
        raise NotImplementedError

    def outbox_sizes(self, ws) -> dict[int, tuple[int, ...]]:
        raise NotImplementedError

    def end_tick(self, ws, ctx: Context, c: dict) -> bool:
        """Expire, spill; returns whether the worker is over its memory budget."""
        return False

    def stored(self, ws) -> tuple[int, ...]:
        """Tuples held in memory per input."""
        raise NotImplementedError

    def on_disk(self, ws) -> bool:
        """Whether the worker holds state on disk (a worker leaving the layout keeps it for
        the clean-up)."""
        return bool(ws.output_log)

    def cleanup_pieces(self, ws, layout, ctx: Context) -> list[Piece]:
        """Disk state that must meet other workers' state for the clean-up phase."""
        return []

    def cleanup(self, ws, pieces: list[Piece], ctx: Context, c: dict, out: ProbeResult) -> None:
        """The clean-up phase after the stream: emit exactly what the run missed."""

    def report(self, ws) -> dict:
        """The program's own report fields (besides the engine's counts)."""
        return {}
