"""The cost model charges every count it has a constant for; the per-count calibration's
designs vary one count and hold the others; a constant of 0 carries a measurement that found
it negligible (fast: synthetic numbers and tiny local runs, no timing)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from joins.online import calibration as cal
from joins.online.cost import CHARGED, CostModel

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = ("received", "store_received", "probe_received", "probes", "outputs", "migrated",
           "sent", "spilled", "disk_probes", "r_stored", "s_stored", "expired", "nway_probes")


def _metrics(n: int = 50, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({c: rng.integers(0, 10_000, n) for c in COLUMNS})


def _only(name: str) -> CostModel:
    zero = {f.name: 0.0 for f in dataclasses.fields(CostModel) if f.name.startswith("per_")}
    return CostModel(**{**zero, name: 1.0})


def test_every_constant_of_the_model_is_charged_on_its_count():
    per = {f.name for f in dataclasses.fields(CostModel) if f.name.startswith("per_")}
    assert per == set(CHARGED), "a constant without a count (or a count without a constant)"
    m = _metrics()
    for name, column in CHARGED.items():
        got = _only(name).worker_cost(m)
        if column == "(each row)":
            expected = pd.Series(1.0, index=m.index)
        else:
            expected = sum(m[c] for c in column.split("+"))
        assert np.allclose(got, expected), name


def test_metrics_without_the_new_counts_still_cost():
    """Results made before store_received and expired were counted: every delivery of those
    runs was stored, nothing expired."""
    old = _metrics().drop(columns=["store_received", "probe_received", "expired"])
    c = CostModel(per_worker=0.0, per_received=0.0, per_store_received=2.0, per_probe=0.0,
                  per_output=0.0, per_migrated=0.0, per_spilled=0.0, per_disk_probe=0.0,
                  per_stored=0.0, per_expired=5.0)
    assert np.allclose(c.worker_cost(old), 2.0 * old["received"])
    # the previous default (kept for the results that cite it) lacks the new constants: its
    # modeled times do not change
    online = json.loads((ROOT / "calibration" / "c7e14bd15b.json").read_text())["online"]
    m = _metrics()
    before = CostModel.from_dict(online)
    assert before.per_store_received == 0.0 and before.per_expired == 0.0
    assert np.allclose(before.worker_cost(m), before.worker_cost(m.drop(columns=["expired"])))


def test_default_calibration_charges_the_per_count_constants():
    """The figures' calibration is the last per-count file's online section on the previous
    default's batch section (calibration/README.md), and the default it replaced is kept for
    the results that cite it."""
    from runtime.cost_model import calibration_id, load_calibration

    default = json.loads((ROOT / "calibration" / "default.json").read_text())
    old = json.loads((ROOT / "calibration" / "c7e14bd15b.json").read_text())
    percount = json.loads((ROOT / "calibration" / "online-percount-20261125.json").read_text())
    assert default["batch"] == old["batch"]
    assert default["id"] == calibration_id(default["batch"], default["online"]) != old["id"]
    assert old["id"] == calibration_id(old["batch"], old["online"]) == "c7e14bd15b"
    for k in ("per_received", "per_store_received", "per_probe", "per_output", "per_expired",
              "per_nway_probe",
              "fixed_per_batch", "per_worker", "per_migrated", "per_stored", "per_spilled",
              "per_disk_probe"):
        assert default["online"][k] == percount["online"][k], k
    assert load_calibration(ROOT / "calibration" / "default.json").id == default["id"]
    for cited in ("cd924ce52f", "39e0618c1e"):  # earlier defaults, cited by results
        before = json.loads((ROOT / "calibration" / f"{cited}.json").read_text())
        assert before["id"] == calibration_id(before["batch"], before["online"]) == cited
    # 39e0618c1e differs only by per_nway_probe, which the two-input joiner never charges
    prev = json.loads((ROOT / "calibration" / "39e0618c1e.json").read_text())["online"]
    assert {k: v for k, v in default["online"].items() if k not in ("per_nway_probe", "source")} \
        == {k: v for k, v in prev.items() if k != "source"}


def _slopes(s: float, p: float, b: float, se: float = 1e-9, out: float = 1e-7,
            out0: float = 0.0, exp: float = 3e-7, stored: float = 4e-8) -> dict:
    sl = {"store_received": s, "probe_received": p, "both_received": b,
          "output_pairs": out, "output_count_only": out0, "expired": exp}
    sl.update(state_and_rows=stored, migrated=2e-6, fixed_per_batch=0.1, mjoin3_probes=4e-7)
    d = {k: {"slope": v, "se": se} for k, v in sl.items()}
    d["expired"]["joint"] = {"stored_batches": {"slope": 1e-7, "se": se}}
    d["state_and_rows"]["joint"] = {"rows": {"slope": 1e-4, "se": se}}
    return d


def test_constants_come_from_the_runs_that_vary_them():
    # S = recv + store, P = recv + probe, B = recv + store + probe
    recv, store, probe = 2e-7, 5e-7, 8e-7
    d = cal.derive_constants(_slopes(recv + store, recv + probe, recv + store + probe),
                             {"per_stored": 3e-8, "per_migrated": 2e-6, "calibration_id": "x"})
    c = d["constants"]
    assert c["per_received"] == pytest.approx(recv)
    assert c["per_store_received"] == pytest.approx(store)
    assert c["per_probe"] == pytest.approx(probe)
    assert c["per_output"] == pytest.approx(1e-7) and c["per_expired"] == pytest.approx(3e-7)
    assert c["per_stored"] == pytest.approx(4e-8)
    assert d["records"]["per_stored"]["runs"] == "state_and_rows"
    assert c["per_worker"] == pytest.approx(1e-4) and c["fixed_per_batch"] == pytest.approx(0.1)
    assert c["per_migrated"] == pytest.approx(2e-6)
    assert d["records"]["per_migrated"]["runs"] == "migrated"
    assert d["records"]["per_spilled"]["runs"] == "kept"  # the spill store's, measured apart
    assert d["records"]["per_output"]["count_only"]["negligible"]


def test_zero_only_when_measured_negligible_else_imprecise():
    # per_received: S + P - B = 0 within a tight error: negligible, 0
    d = cal.derive_constants(_slopes(5e-7, 8e-7, 1.3e-6, se=1e-10), {})
    rec = d["records"]["per_received"]
    assert d["constants"]["per_received"] == 0.0 and rec["negligible"]
    assert "measured as negligible" in rec["note"]
    # a noisy estimate is not called negligible: it keeps its (clipped) value
    d = cal.derive_constants(_slopes(5e-7, 8e-7, 1.2e-6, se=5e-7), {})
    rec = d["records"]["per_received"]
    assert not rec["negligible"] and rec["note"].startswith("imprecise")
    assert d["constants"]["per_received"] == pytest.approx(1e-7)
    # significantly below 0: not negligible either (0, and the rule check flags it)
    d = cal.derive_constants(_slopes(5e-7, 8e-7, 1.6e-6, se=1e-9), {})
    rec = d["records"]["per_received"]
    assert d["constants"]["per_received"] == 0.0 and not rec["negligible"]
    assert rec["note"].startswith("inconsistent")


def test_check_zero_constants():
    good = {"online": {"per_output": 0.0, "per_probe": 1e-6},
            "measurements": {"per_output": {"estimate": 1e-10, "se": 1e-10,
                                            "negligible": True}}}
    assert cal.check_zero_constants(good) == []
    bad = {"online": {"per_output": 0.0, "per_expired": 0.0},
           "measurements": {"per_output": {"estimate": -1e-7, "se": 1e-6,
                                           "negligible": False}}}
    assert cal.check_zero_constants(bad) == ["per_output", "per_expired"]


def test_committed_per_count_calibrations_keep_the_rule():
    files = sorted((ROOT / "calibration").glob("online-percount-*.json"))
    assert files, "no per-count calibration committed"
    for f in files:
        data = json.loads(f.read_text())
        assert cal.check_zero_constants(data) == [], f.name
        for name in CHARGED:  # every constant says which run measured it
            assert name in data["measurements"], (f.name, name)
        CostModel.from_dict(data["online"])


def test_designs_vary_one_count_and_hold_the_others():
    """Tiny local runs of every experiment: the counts are exact, so what each design holds
    is checked here; the times are measured on Spark by calibrate_per_count."""
    n = 300
    d = cal.measure_counts(None, cal.count_experiments(n), repeats=1, n=n, log=lambda s: None,
                           backend="local")
    by = {e: g.sort_values("run") for e, g in d.groupby("experiment")}

    def same(e, col):
        return by[e][col].nunique() == 1

    def varies(e, col):
        return by[e][col].is_monotonic_increasing and by[e][col].nunique() == len(by[e])

    for e in ("output_pairs", "output_count_only"):
        assert varies(e, "outputs")
        assert all(same(e, c) for c in ("received", "probes", "stored_batches", "rows"))
    assert varies("store_received", "store_received")
    assert same("store_received", "probe_received") and same("store_received", "probes")
    assert varies("probe_received", "probe_received")
    assert same("probe_received", "store_received")
    assert (by["probe_received"]["probes"] == by["probe_received"]["probe_received"]).all()
    for e in ("store_received", "probe_received", "both_received", "mjoin3_received"):
        assert by[e]["outputs"].sum() == 0 and same(e, "rows")
    assert varies("both_received", "received")
    b = by["both_received"]
    assert (b["received"] == b["store_received"]).all() and (b["received"] == b["probes"]).all()
    assert varies("expired", "expired") and same("expired", "received")
    assert same("expired", "probes") and by["expired"]["outputs"].sum() == 0
    assert varies("mjoin3_received", "received")
    # n-way probes vary; the deliveries and their first probes are held
    assert varies("mjoin3_probes", "nway_probes") and same("mjoin3_probes", "received")
    assert same("mjoin3_probes", "probes")
    st = by["state_and_rows"]  # stored state and rows vary apart (not collinear)
    assert st["outputs"].sum() == 0
    design = np.column_stack([np.ones(len(st)), st["stored_batches"], st["rows"]])
    assert np.linalg.matrix_rank(design) == 3 and st["batches"].nunique() >= 3
    mig = by["migrated"]
    assert varies("migrated", "moved") and mig["moved"].iloc[0] == 0
    assert same("migrated", "received") and mig["outputs"].sum() == 0


def test_fit_keeps_per_count_constants_and_fits_the_rest():
    """make calibrate: the per-count constants go to the NNLS fit as known; it finds the
    constants no per-count run measures."""
    from joins.online.cost import fit

    rng = np.random.default_rng(3)
    m = _metrics(300, seed=3)
    true = CostModel(per_worker=0.01, per_received=1e-7, per_store_received=2e-7,
                     per_probe=3e-7, per_output=1e-8, per_migrated=2e-6, per_spilled=0.0,
                     per_disk_probe=0.0, per_stored=5e-8, per_expired=4e-7)
    m["cpu_seconds"] = true.worker_cost(m) + rng.normal(0, 1e-6, len(m))
    known = {k: getattr(true, k) for k in ("per_received", "per_store_received", "per_probe",
                                           "per_output", "per_expired", "per_stored",
                                           "per_spilled", "per_disk_probe")}
    got = fit(m, known=known, clock="cpu_seconds")
    assert got["per_migrated"] == pytest.approx(2e-6, rel=0.02)
    assert got["per_worker"] == pytest.approx(0.01, rel=0.02)
    assert got["per_store_received"] == 2e-7 and got["r2"] > 0.99
