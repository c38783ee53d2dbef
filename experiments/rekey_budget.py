"""Re-key finished points that a memory-budget change cannot have changed, or say why not.

``python -m experiments.rekey_budget figure=amjoin/fig5 old='{small: 1.1e7, ...}' [oom=true]
[apply=true]``

A point's config hash covers its figure's ``rules``, so changing ``rules.memory_budget_bytes``
makes every stored point stale. A point is re-keyed (its ``config_hash`` set to the current
one and its ``memory_budget_bytes`` row to the new budget; nothing else touched) only when

* its stored hash is the hash of the current config with the old budget put back (so the
  budget is the only setting that changed), and
* it finished ``ok`` and every budget-dependent quantity it recorded is within the new budget:
  the largest index entry (``max_group_records``), Full-SkewJoin's broadcast hot-key records
  (``broadcast_rows``) and AM-Join's Small-Large small sides (``rows_ch_left``,
  ``rows_ch_right``, which the budget may turn from broadcast to shuffle), each times the
  record size. No check then fires and no decision reads differently, so a run under the new
  budget computes the same thing.

With ``oom=true`` an ``oom`` point is re-keyed too when its recorded need
(``memory_needed_bytes``) also exceeds the new budget and its error text is exactly what
:class:`joins.api.BudgetExceeded` writes for that need under the old budget: the error is then
rewritten as a run under the new budget writes it. (Running such points is preferred; they
fail fast, but each one distributes its inputs first.) Everything else (points that would now
fail, points whose config differs in more than the budget) is listed to be rerun. Without
``apply=true`` it only reports.
"""

from __future__ import annotations

import copy
import sys

import pandas as pd
from omegaconf import OmegaConf

from experiments.figure_spec import config_hash, scaled_rule
from experiments.figures import load_figure
from experiments.results import results_dir
from joins.api import BudgetExceeded

NEED_METRICS = ("max_group_records", "broadcast_rows", "rows_ch_left", "rows_ch_right")


def _rules_budget(figure: dict, scale: str) -> float:
    return float(scaled_rule(figure["rules"], "memory_budget_bytes", scale,
                             figure["workload"]["sizes"]))


def _oom_error(frame: pd.DataFrame, metrics: dict, budget: float) -> str | None:
    """The error a run under ``budget`` writes for this oom point, if its stored error is the
    same message under its stored budget (else None)."""
    error = str(frame["error"].iloc[0])
    what = error.split(" needs ", 1)[0]
    needed, old = metrics.get("memory_needed_bytes"), metrics.get("memory_budget_bytes")
    if needed is None or old is None or error != str(BudgetExceeded(what, needed, old)):
        return None
    return str(BudgetExceeded(what, needed, budget))


def _oom_action(frame: pd.DataFrame, metrics: dict, budget: float) -> tuple[str, str]:
    needed = metrics.get("memory_needed_bytes", float("nan"))
    if not needed > budget:
        return "rerun", f"needed {needed:,.0f} B fits the new budget {budget:,.0f} B"
    if _oom_error(frame, metrics, budget) is None:
        return "rerun", "its error text is not BudgetExceeded's for its recorded need"
    return "rekey", f"oom: needed {needed:,.0f} B > new budget {budget:,.0f} B"


def plan(figure_id: str, old_rule, scale: str = "small", root: str = "results",
         oom: bool = False) -> list[tuple[str, str, str]]:
    """(file, action, reason) per stored point: action 'rekey', 'current' or 'rerun'."""
    figure = load_figure(figure_id, scale)
    old = copy.deepcopy(figure)
    old["rules"]["memory_budget_bytes"] = old_rule
    budget = _rules_budget(figure, scale)
    out = []
    for path in sorted(results_dir(root, figure_id).glob("[!._]*.parquet")):
        frame = pd.read_parquet(path)
        series, status = str(frame["series"].iloc[0]), str(frame["status"].iloc[0])
        stored = set(frame["config_hash"].astype(str))
        if series not in figure["series"]:
            out.append((path.name, "rerun", f"series {series} no longer in the figure"))
            continue
        if stored == {config_hash(figure, scale, 0, series)}:
            out.append((path.name, "current", "already the current config"))
            continue
        if stored != {config_hash(old, scale, 0, series)}:
            out.append((path.name, "rerun", "its config differs in more than the budget"))
            continue
        metrics = dict(zip(frame["metric"], frame["value"], strict=False))
        if status == "oom" and oom:
            out.append((path.name, *_oom_action(frame, metrics, budget)))
            continue
        if status != "ok":
            out.append((path.name, "rerun", f"status {status} (its record names the old budget)"))
            continue
        record_bytes = float(figure["workload"]["params"].get("size", 0))
        needs = {m: metrics[m] * record_bytes for m in NEED_METRICS if m in metrics}
        over = {m: v for m, v in needs.items() if v > budget}
        if over:
            out.append((path.name, "rerun", f"recorded {over} B > new budget {budget:,.0f} B"))
            continue
        top = max(needs.values(), default=0.0)
        out.append((path.name, "rekey", f"largest budget-dependent need {top:,.0f} B <= "
                                        f"{budget:,.0f} B"))
    return out


def apply(figure_id: str, actions: list[tuple[str, str, str]], scale: str = "small",
          root: str = "results") -> int:
    figure = load_figure(figure_id, scale)
    budget = _rules_budget(figure, scale)
    folder = results_dir(root, figure_id)
    n = 0
    for name, action, _ in actions:
        if action != "rekey":
            continue
        path = folder / name
        frame = pd.read_parquet(path)
        series = str(frame["series"].iloc[0])
        if str(frame["status"].iloc[0]) == "oom":
            metrics = dict(zip(frame["metric"], frame["value"], strict=False))
            frame["error"] = _oom_error(frame, metrics, budget)
            frame["error"] = frame["error"].astype("string")
        frame["config_hash"] = config_hash(figure, scale, 0, series)
        frame.loc[frame["metric"] == "memory_budget_bytes", "value"] = budget
        frame["config_hash"] = frame["config_hash"].astype("string")
        tmp = path.with_name(f".{name}.rekey.tmp")
        frame.to_parquet(tmp, index=False)
        tmp.replace(path)
        n += 1
    return n


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    opts = dict(a.split("=", 1) for a in argv)
    scale = opts.get("scale", "small")
    # parsed as Hydra parses the figure configs (PyYAML would read 8.0e4 as a string)
    old = OmegaConf.to_container(OmegaConf.create({"v": OmegaConf.create(opts["old"])}))["v"]
    actions = plan(opts["figure"], old, scale, oom=opts.get("oom") == "true")
    for name, action, reason in actions:
        print(f"{opts['figure']} {name}: {action} ({reason})")
    if opts.get("apply") == "true":
        print(f"re-keyed {apply(opts['figure'], actions, scale)} points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
