"""Squall's joiner: stored R and S as key-sorted indexes, the local join of delivered tuples,
migrated-tuple handling (Alg 3), memory budget with spill or eviction, the clean-up phase.

Two inputs (0 = R, 1 = S). Deliveries with role BOTH (grid, hash) take the fast path: R probes
the old S, R is stored, then S probes all R, so each new pair is produced once. Store-only and
probe-only deliveries (join-biclique) take the general path: a probe sees the old state fully
and the same batch's stored tuples only if they arrived earlier (the arrival-order rule).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from joins.online.chained_index import Chain
from joins.online.kernel import ProbeResult, SideStore, expand, probe
from joins.online.layouts import BOTH, PROBE, STORE
from joins.online.programs.base import Context, Piece, Program, WorkerBase, commit_file
from joins.online.spill_store import SpillStore


@dataclass
class JoinerState(WorkerBase):
    r: SideStore = field(default_factory=SideStore)
    s: SideStore = field(default_factory=SideStore)
    disk_resident: int = 0
    spill_files: list[str] = field(default_factory=list)
    last_seq: int = -1  # the last sequence number processed (eviction point)
    # BiStream's chained index (archive=): per relation its subindexes, and the newest event
    # time of each relation delivered here (what discards the other relation's subindexes)
    chain: list = field(default_factory=lambda: [Chain(), Chain()])
    seen_ts: list = field(default_factory=lambda: [-np.inf, -np.inf])

    def side(self, rel: int) -> SideStore:
        return self.r if rel == 0 else self.s

    def set_side(self, rel: int, store: SideStore) -> None:
        if rel == 0:
            self.r = store
        else:
            self.s = store


def _pairs(ctx: Context) -> bool:
    cfg = ctx.config
    return cfg.want_pairs or cfg.pairs_dir is not None or cfg.cleanup_log


def _empty_like(store: SideStore) -> SideStore:
    return store.select(np.zeros(len(store), bool))


class Joiner(Program):
    name = "joiner"
    inputs = 2
    spill_modes = ("charge", "disk", "evict")

    def new_worker(self, wid):
        return JoinerState(wid)

    def deliver(self, ws, d, ctx, c, out):
        cfg = ctx.config
        kernel, pairs, win = cfg.kernel, _pairs(ctx), cfg.window
        if cfg.archive is not None and d.ts is not None:
            for rel in (0, 1):
                mine = d.rel == rel
                if mine.any():
                    ws.seen_ts[rel] = max(ws.seen_ts[rel], float(d.ts[mine].max()))
        if np.all(d.role == BOTH):
            new_r, new_s = d.side(0, STORE), d.side(1, STORE)
            probe(ws.s, new_r, True, kernel, out, pairs, window=win)
            ws.r.insert(new_r)
            probe(ws.r, new_s, False, kernel, out, pairs, window=win)
            ws.s.insert(new_s)
            c["probes"] += len(new_r) + len(new_s)
            return
        pr, ps = d.side(0, PROBE), d.side(1, PROBE)
        sr, ss = d.side(0, STORE), d.side(1, STORE)
        probe(ws.s, pr, True, kernel, out, pairs, window=win)
        probe(ss, pr, True, kernel, out, pairs, before_probe=True, window=win)
        probe(ws.r, ps, False, kernel, out, pairs, window=win)
        probe(sr, ps, False, kernel, out, pairs, before_probe=True, window=win)
        ws.r.insert(sr)
        ws.s.insert(ss)
        c["probes"] += len(pr) + len(ps)

    def receive(self, ws, piece, ctx, c, out):
        """Rejoin (Alg 3 lines 10/17): a migrated tuple joins the new epoch's stored tuples,
        then is kept. Handoff: it is only stored (its pairs were produced where it was)."""
        if piece.start >= 0:
            other = ws.s if piece.rel == 0 else ws.r
            probe(other, piece.tuples, piece.rel == 0, ctx.config.kernel, out, _pairs(ctx),
                  stored_seq_min=piece.start, window=ctx.config.window)
            c["probes"] += len(piece.tuples)
        ws.side(piece.rel).insert(piece.tuples)
        return len(piece.tuples)

    def begin_move(self, ws, old, new, start, mode):
        """Split the state into what stays indexed, per-destination outboxes (copies to send)
        and, in rejoin mode, what is discarded (held until finalisation, Alg 3 line 22)."""
        me = ws.wid
        for rel in (0, 1):
            store = ws.side(rel)
            if not len(store):
                continue
            keep, sends = old.moves(new, rel == 0, store.key, store.u, me)
            for dest, mask in sends:
                box = ws.outbox.setdefault(dest, [SideStore(), SideStore()])
                box[rel].insert(store.select(mask))
            if mode == "rejoin":
                ws.pending += int(len(store) - keep.sum())
                ws.set_side(rel, store.select(keep))
        if mode == "rejoin":
            ws.start = start
        else:
            ws.handoff = True

    def take(self, ws, dest, rel, k):
        box = ws.outbox.get(dest)
        if box is None or not len(box[rel]):
            return None
        sent, box[rel] = box[rel].head(min(k, len(box[rel])))
        if ws.handoff:  # it leaves the index only now: probes met it until here
            store = ws.side(rel)
            ws.set_side(rel, store.select(~np.isin(store.seq, sent.seq)))
        return sent

    def outbox_sizes(self, ws):
        return {d: (len(b[0]), len(b[1])) for d, b in ws.outbox.items() if len(b[0]) + len(b[1])}

    def _forget(self, ws, seqs: np.ndarray, c: dict | None) -> None:
        """Tuples that left memory (expired, evicted) leave the outboxes too; in rejoin mode
        the outbox copies are the only ones left in memory, so they count as expired here."""
        for box in ws.outbox.values():
            for rel in (0, 1):
                gone = np.isin(box[rel].seq, seqs)
                if gone.any():
                    box[rel] = box[rel].select(~gone)

    def end_tick(self, ws, ctx, c):
        cfg = ctx.config
        ws.last_seq = ctx.last_seq
        if cfg.archive is not None:
            self._discard_subindexes(ws, cfg, c)
        elif cfg.window is not None and np.isfinite(ctx.watermark):
            cut = ctx.watermark - cfg.window
            keep = cfg.spill == "evict" and cfg.budget_tuples is not None
            gone: dict = {0: None, 1: None}
            # a rejoin move in flight: a migrated tuple still to come probes this epoch's
            # tuples (seq >= start) at its receiver, and may be within the window of one that
            # the watermark has passed; so this epoch's stored tuples and the outboxes' copies
            # stay until the move ends (the pair check keeps the window exact)
            held = ws.start if ws.start >= 0 and not ws.handoff else None
            for rel in (0, 1):
                store = ws.side(rel)
                if store.ts is None:  # nothing stored yet
                    continue
                old = store.ts < cut
                if held is not None:
                    old &= store.seq < held
                if old.any():
                    if keep:
                        gone[rel] = store.select(old)
                    c["expired"] += int(old.sum())
                    ws.set_side(rel, store.select(~old))
            for box in ws.outbox.values() if held is None else ():
                # a handoff's copies: the tuple expires from the index alike
                for rel in (0, 1):
                    if box[rel].ts is not None:
                        box[rel] = box[rel].select(box[rel].ts >= cut)
            if keep and any(g is not None and len(g) for g in gone.values()):
                # an expired tuple may still pair with one evicted before it arrived: the
                # clean-up needs it, so it goes to disk like an evicted one (a later arrival
                # is beyond its window, so its eviction point misses nothing more)
                self._write_disk(ws, ctx, gone[0], gone[1], "x")
        return self._spill(ws, ctx, c)

    def _discard_subindexes(self, ws, cfg, c: dict) -> None:
        """The chained index: index the tick's new tuples into subindexes, then drop each
        whole subindex that the other relation's newest tuple here is past by window + delay
        (:mod:`joins.online.chained_index`)."""
        for rel in (0, 1):
            store, chain = ws.side(rel), ws.chain[rel]
            if store.ts is None or not len(store):
                continue
            new = np.flatnonzero(store.seq > chain.upto)
            order = new[np.argsort(store.seq[new], kind="stable")]
            chain.extend(store.seq[order], store.ts[order], cfg.archive)
            cut = chain.expire(ws.seen_ts[1 - rel], cfg.window + cfg.delay)
            if cut >= 0:
                old = store.seq <= cut
                c["expired"] += int(old.sum())
                ws.set_side(rel, store.select(~old))

    def stored(self, ws):
        return len(ws.r), len(ws.s)

    def report(self, ws):
        return dict(r_stored=len(ws.r), s_stored=len(ws.s), pending=ws.pending,
                    subindexes=len(ws.chain[0]) + len(ws.chain[1]),
                    outbox=sum(len(b) for box in ws.outbox.values() for b in box))

    # --- memory budget ---------------------------------------------------------------------
    def _spill(self, ws, ctx: Context, c: dict) -> bool:
        """Apply the memory budget; returns whether the worker is over it.

        ``charge``: the tuples beyond the budget are counted as on disk (``spilled`` = newly
        overflowing tuples this batch; every probe at an overflowing worker is a disk probe)
        and the cost model charges them. ``disk``: the same counts, and the overflowing tuples
        are really written to the executor's local disk, into the on-disk B-tree store whose
        write and probe costs ``make calibrate`` measures (:mod:`joins.online.spill_store`,
        one file per worker and batch) as Squall's joiners spilled to BerkeleyDB; the
        in-memory index keeps its copy, so the result is unchanged and only the writes are
        real. ``evict``: D-CAPE's disk adaptation - the oldest tuples beyond the budget leave
        memory for a file (they no longer join new tuples) and :meth:`cleanup` produces the
        missed results after the stream; a pair is missed exactly when its later tuple
        arrived after its earlier tuple was evicted.
        """
        cfg = ctx.config
        if cfg.budget_tuples is None:
            return False
        if cfg.spill == "evict":
            return self._evict(ws, ctx, c)
        held = len(ws.r) + len(ws.s) + ws.pending
        over = max(0, held - cfg.budget_tuples)
        new = max(0, over - ws.disk_resident)
        c["spilled"] += new
        if over:
            c["disk_probes"] += c["probes"]
        if new and cfg.spill == "disk":
            path = os.path.join(cfg.spill_dir or "/tmp", f"w{ws.wid:05d}-b{ctx.batch:06d}.sqlite")
            tail = ws.s if len(ws.s) >= new else ws.r

            def write(tmp: str) -> None:
                store = SpillStore(tmp)
                store.append(tail.key[-new:], tail.tid[-new:], tail.seq[-new:])
                store.close()

            commit_file(path, write)  # a recomputed task rewrites its batch's file
            ws.spill_files.append(path)
        ws.disk_resident = over
        return over > 0

    def _evict(self, ws, ctx: Context, c: dict) -> bool:
        cfg = ctx.config
        held = len(ws.r) + len(ws.s) + ws.pending
        over = held - cfg.budget_tuples
        if over <= 0:
            return ws.disk_resident > 0
        seqs = np.concatenate([ws.r.seq, ws.s.seq])
        over = min(over, len(seqs))
        if over <= 0:
            return True
        cut = np.sort(seqs)[over - 1]  # the oldest `over` tuples (ties: seq is unique)
        parts = {}
        for rel, name in ((0, "r"), (1, "s")):
            store = ws.side(rel)
            old = store.seq <= cut
            parts[name] = store.select(old)
            ws.set_side(rel, store.select(~old))
        self._forget(ws, seqs[seqs <= cut], None)
        self._write_disk(ws, ctx, parts["r"], parts["s"], "e")
        ws.disk_resident += over
        c["spilled"] += over
        return True

    def _write_disk(self, ws, ctx: Context, r: SideStore | None, s: SideStore | None,
                    tag: str) -> None:
        """Write tuples that leave memory at this tick's end to one file (``tag``: e evicted,
        x expired), with the point they left after: the clean-up's eviction point."""
        parts = {n: st if st is not None else SideStore() for n, st in (("r", r), ("s", s))}
        path = os.path.join(ctx.config.spill_dir or "/tmp",
                            f"w{ws.wid:05d}-b{ctx.batch:06d}{tag}.npz")
        extra = {}
        if any(parts[n].ts is not None for n in ("r", "s")):  # an empty side has no times
            extra = {f"{n}_ts": parts[n].ts if parts[n].ts is not None else np.zeros(0)
                     for n in ("r", "s")}
        arrays = {f"{n}_{a}": getattr(parts[n], a) for n in ("r", "s")
                  for a in ("key", "tid", "seq", "u")}

        def write(tmp: str) -> None:
            with open(tmp, "wb") as f:  # a file object: savez adds no ".npz" to the name
                np.savez(f, **arrays, evicted_after=np.array([ws.last_seq]), **extra)

        commit_file(path, write)  # a recomputed task rewrites its batch's file, whole
        ws.spill_files.append(path)

    # --- clean-up phase ----------------------------------------------------------------------
    def _disk(self, ws) -> dict[str, list[tuple[SideStore, np.ndarray]]]:
        sides: dict[str, list] = {"r": [], "s": []}
        for path in ws.spill_files:
            with np.load(path) as z:
                ev = int(z["evicted_after"][0])
                for n in ("r", "s"):
                    ts = z[f"{n}_ts"] if f"{n}_ts" in z.files else None
                    st = SideStore(z[f"{n}_key"], z[f"{n}_tid"], z[f"{n}_seq"], z[f"{n}_u"],
                                   ts=ts)
                    sides[n].append((st, np.full(len(st), ev, np.int64)))
        return sides

    def on_disk(self, ws):
        return bool(ws.spill_files or ws.output_log)

    def cleanup_pieces(self, ws, layout, ctx):
        """Evicted tuples whose partners now live elsewhere (their partition group moved) go
        to the worker that holds the group under the final layout. With an output log
        (``cleanup_log``: partners may have met at different workers over the run) everything
        the worker holds, in memory and on disk, and its log go to one gathering worker."""
        if ctx.config.cleanup_log:
            return self._gather_all(ws, int(np.min(layout.workers)))
        if not ws.spill_files or ctx.config.spill != "evict":
            return []
        out, keep = [], {"r": [], "s": []}
        for n, lst in self._disk(ws).items():
            rel = 0 if n == "r" else 1
            for st, ev in lst:
                dest = layout.source(rel == 0, st.key, st.u, ws.wid)
                for d in np.unique(dest):
                    m = dest == d
                    if int(d) == ws.wid:
                        keep[n].append((st.select(m), ev[m]))
                    else:
                        out.append(Piece(int(d), rel, st.select(m), evicted_after=ev[m]))
        ws.spill_files = []
        ws.kept_disk = keep  # type: ignore[attr-defined]
        return out

    def _gather_all(self, ws, dest: int) -> list[Piece]:
        none = np.zeros(0, np.int64)
        out = [Piece(dest, rel, st, evicted_after=none)
               for rel, st in ((0, ws.r), (1, ws.s)) if len(st)]
        for n, lst in self._disk(ws).items():
            out += [Piece(dest, 0 if n == "r" else 1, st, evicted_after=none)
                    for st, _ in lst if len(st)]
        for path in ws.output_log:
            with np.load(path) as z:
                out.append(Piece(dest, -1, (z["arr_0"], z["arr_1"]), evicted_after=none))
        ws.spill_files, ws.output_log = [], []
        ws.r, ws.s = _empty_like(ws.r), _empty_like(ws.s)
        return out

    def _cleanup_from_log(self, pieces, ctx, c, out) -> None:
        """Every tuple the workers held (each once: a grid holds copies) joined, minus the
        pairs the run produced (its output log): exactly the missed pairs."""
        sides = {rel: [p.tuples for p in pieces if p.rel == rel] for rel in (0, 1)}
        if not sides[0] or not sides[1]:
            return
        stores = []
        for rel in (0, 1):
            st = SideStore.concat(sides[rel])
            _, first = np.unique(st.tid, return_index=True)
            keep = np.zeros(len(st), bool)
            keep[first] = True
            stores.append(st.select(keep))
        rs, ss = stores
        lo, hi = ss.ranges(rs.key, ctx.config.kernel, True)
        pi, si = expand(lo, hi)
        if ctx.config.window is not None and len(pi):
            near = np.abs(rs.ts[pi] - ss.ts[si]) <= ctx.config.window
            pi, si = pi[near], si[near]
        width = np.int64(max(int(ss.tid.max(initial=0)), 0) + 1)
        logged = [p.tuples for p in pieces if p.rel == -1]
        done = np.concatenate([r * width + s for r, s in logged]) if logged else \
            np.zeros(0, np.int64)
        missed = ~np.isin(rs.tid[pi] * width + ss.tid[si], done)
        c["probes"] += len(rs)
        out.add(int(missed.sum()), rs.tid[pi[missed]], ss.tid[si[missed]])

    def cleanup(self, ws, pieces, ctx, c, out):
        """Join everything the worker ever held (memory + evicted files + pieces gathered from
        other workers) and emit exactly the pairs the run missed: the later tuple's seq is
        beyond the eviction point of the earlier one, within the window."""
        if ctx.config.cleanup_log:
            self._cleanup_from_log(pieces, ctx, c, out)
            return
        disk = getattr(ws, "kept_disk", None) or self._disk(ws)
        for p in pieces:
            disk["r" if p.rel == 0 else "s"].append((p.tuples, p.evicted_after))
        if not any(disk.values()):
            return
        big = np.iinfo(np.int64).max
        merged = {}
        for n, mem in (("r", ws.r), ("s", ws.s)):
            lst = [(mem, np.full(len(mem), big, np.int64))] + disk[n]
            st = SideStore.concat([x for x, _ in lst])
            ev = np.concatenate([e for _, e in lst])
            order = np.argsort(np.concatenate([x.key for x, _ in lst]), kind="stable")
            merged[n] = (st, ev[order])
        (rs, rev), (ss, sev) = merged["r"], merged["s"]
        lo, hi = ss.ranges(rs.key, ctx.config.kernel, True)
        pi, si = expand(lo, hi)
        r_first = rs.seq[pi] < ss.seq[si]
        later = np.where(r_first, ss.seq[si], rs.seq[pi])
        evict_first = np.where(r_first, rev[pi], sev[si])
        missed = later > evict_first
        if ctx.config.window is not None and len(pi):
            missed &= np.abs(rs.ts[pi] - ss.ts[si]) <= ctx.config.window
        c["probes"] += len(rs)
        if _pairs(ctx):
            out.add(int(missed.sum()), rs.tid[pi[missed]], ss.tid[si[missed]])
        else:
            out.add(int(missed.sum()))


__all__ = ["Joiner", "JoinerState", "ProbeResult"]
