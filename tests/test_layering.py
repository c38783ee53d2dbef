"""The project's packages import downwards only, and no module imports itself round a cycle.

    runtime  <  datagen  <  joins  <  experiments  <  benchmarks
    figures: runtime, and experiments' figure registry and result readers (FIGURES_READS)

Nothing imports ``figures``: experiments redraw charts with ``python -m figures.plot`` in a
child process (:func:`experiments.figures.draw_charts`). Every import statement counts, at the
top of a module, inside a function or under ``TYPE_CHECKING``; a registry's
``"package.module:attr"`` string counts for the layer rule too (it is imported when looked up),
though not for cycles (a registry loading its own plugins is not one). Sources are read with
``ast``; nothing is imported.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# what each layer may import (itself included)
ALLOWED = {
    "runtime": {"runtime"},
    "datagen": {"runtime", "datagen"},
    "joins": {"runtime", "datagen", "joins"},
    "experiments": {"runtime", "datagen", "joins", "experiments"},
    "benchmarks": {"runtime", "datagen", "joins", "experiments", "benchmarks"},
    "figures": {"runtime", "figures"},
}
# the experiments modules figures may read: the figure registry, its config, the results
FIGURES_READS = {"experiments.figures", "experiments.config", "experiments.results"}

# Cycles known to remain, each the exact set of its modules (none: the online engine's
# calibration moved out of joins.online.cost into joins.online.calibration). An entry that no
# longer matches a cycle fails test_known_cycles_still_exist: delete it then.
KNOWN_CYCLES: list[frozenset] = []

Edge = tuple[str, str, str, int]  # (imported project module, name as written, file, line)
_REGISTRY_ENTRY = re.compile(r"([A-Za-z_]\w*(?:\.\w+)*):\w+")


def packages(root: Path) -> list[str]:
    """The project's top-level packages (folders with an ``__init__.py``)."""
    return sorted(p.parent.name for p in root.glob("*/__init__.py"))


def modules(root: Path, pkgs: list[str]) -> dict[str, Path]:
    """Dotted module name -> file, for every module of ``pkgs`` (a package is its __init__)."""
    found = {}
    for pkg in pkgs:
        for f in sorted((root / pkg).rglob("*.py")):
            parts = list(f.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = f
    return found


def _imported(name: str, f: Path, tree: ast.AST) -> Iterator[tuple[str, int, bool]]:
    """(dotted target, line, is a registry string) for every import in a module; ``from a
    import b`` yields ``a.b`` (resolved below to the module ``a.b`` if there is one, else ``a``)."""
    package = name.split(".") if f.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, False
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from . import x, from ..a import b
                base = package[:len(package) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                yield f"{module}.{alias.name}", node.lineno, False
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            m = _REGISTRY_ENTRY.fullmatch(node.value)
            if m:
                yield m.group(1), node.lineno, True


@functools.cache
def import_graph(root: Path) -> tuple[dict[str, list[Edge]], dict[str, list[Edge]]]:
    """Per module of the checked packages: the project modules it imports, and those its
    registry strings name. A target resolves to its longest prefix that is a project module
    (a package at least), so an import of a module that does not exist still counts."""
    pkgs = packages(root)
    checked = [p for p in pkgs if p != "tests"]
    mods = modules(root, pkgs)
    imports: dict[str, list[Edge]] = {}
    registry: dict[str, list[Edge]] = {}
    for name, f in modules(root, checked).items():
        rel = str(f.relative_to(root))
        imports[name], registry[name] = [], []
        for target, line, is_registry in _imported(name, f, ast.parse(f.read_text(), str(f))):
            if target.split(".")[0] not in pkgs:
                continue  # not the project's
            module = target
            while module not in mods and "." in module:
                module = module.rsplit(".", 1)[0]
            (registry if is_registry else imports)[name].append((module, target, rel, line))
    return imports, registry


def upward_imports(root: Path) -> list[str]:
    imports, registry = import_graph(root)
    bad = []
    for name in imports:
        layer = name.split(".")[0]
        allowed = ALLOWED.get(layer)
        if allowed is None:
            bad.append(f"package {layer}/ has no layer: add it to ALLOWED in {Path(__file__).name}")
            continue
        for module, written, rel, line in imports[name] + registry[name]:
            if module.split(".")[0] in allowed or (layer == "figures" and module in FIGURES_READS):
                continue
            bad.append(f"{rel}:{line}: {name} imports {written}")
    return sorted(set(bad))


def cycles(root: Path) -> list[list[str]]:
    """The import graph's strongly connected components of more than one module (or a module
    importing itself), each as one cycle through it, by Tarjan's algorithm."""
    imports, _ = import_graph(root)
    succ = {m: sorted({e[0] for e in edges}) for m, edges in imports.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(v: str) -> None:  # recursion depth is bounded by the number of modules
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in succ.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1 or v in succ.get(v, []):
                components.append(comp)

    for v in sorted(succ):
        if v not in index:
            visit(v)
    return [_cycle_through(comp, succ) for comp in components]


def _cycle_through(comp: set[str], succ: dict[str, list[str]]) -> list[str]:
    """One cycle inside a strongly connected component: a shortest path from its first module
    back to itself (breadth first)."""
    start = min(comp)
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in succ.get(v, []):
                if w not in comp:
                    continue
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if w not in parent:
                    parent[w] = v
                    nxt.append(w)
        frontier = nxt
    return sorted(comp)  # not reached: a component always holds a cycle


def _describe(cycle: list[str], root: Path) -> str:
    imports, _ = import_graph(root)
    steps = []
    for a, b in pairwise(cycle):
        where = next(f"{rel}:{line}" for t, _, rel, line in imports[a] if t == b)
        steps.append(f"{a} -> {b} ({where})")
    return "; ".join(steps)


def test_no_upward_imports():
    bad = upward_imports(ROOT)
    assert not bad, "imports against the layering (see this test's docstring):\n" + "\n".join(bad)


def test_no_import_cycles():
    found = [c for c in cycles(ROOT) if frozenset(c) not in KNOWN_CYCLES]
    assert not found, "import cycles:\n" + "\n".join(_describe(c, ROOT) for c in found)


def test_known_cycles_still_exist():
    present = {frozenset(c) for c in cycles(ROOT)}
    gone = [sorted(k) for k in KNOWN_CYCLES if k not in present]
    assert not gone, f"no longer a cycle, delete from KNOWN_CYCLES: {gone}"


def test_every_package_has_a_layer():
    assert set(packages(ROOT)) - {"tests"} == set(ALLOWED)


# The checker itself, on a made-up project.

def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    for pkg in ALLOWED:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


@pytest.mark.parametrize("rel, text", [
    ("datagen/chunks.py", "def f():\n    from experiments.paths import SCRATCH\n"),
    ("datagen/cache.py", "import experiments.results\n"),
    ("joins/online/a.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                          "    from experiments import kinds\n"),
    ("runtime/paths.py", "from joins import api\n"),
    ("figures/plot.py", "from joins.oracle import oracle_count\n"),
    ("figures/plot.py", "from experiments.run import main\n"),
    ("experiments/report.py", "from figures.plot import plot_figure\n"),
    ("joins/registry.py", "ENTRY = 'experiments.kinds.batch_join:run_point'\n"),
    ("datagen/x.py", "from ..experiments import paths\n"),
])
def test_the_checker_sees_an_upward_import(tmp_path, rel, text):
    assert upward_imports(_project(tmp_path, {rel: text}))


def test_the_checker_allows_downward_imports_and_figures_reading_results(tmp_path):
    root = _project(tmp_path, {
        "experiments/results.py": "from runtime import paths\n",
        "figures/plot.py": "from experiments.results import read\nfrom runtime import paths\n",
        "joins/cli.py": "def f():\n    from datagen import orders\n    from runtime.x import y\n",
        "experiments/figures.py": "CMD = ['-m', 'figures.plot']\n",  # a child process
    })
    assert upward_imports(root) == []


def test_the_checker_finds_a_cycle_through_a_function_level_import(tmp_path):
    root = _project(tmp_path, {
        "joins/cli.py": "def main():\n    from joins.online.cli import main\n",
        "joins/online/__init__.py": "",
        "joins/online/cli.py": "from joins.cli import CliError\n",
        "joins/api.py": "from . import cli\n",  # into the cycle, not part of it
    })
    assert cycles(root) == [["joins.cli", "joins.online.cli", "joins.cli"]]
    assert "joins/online/cli.py:1" in _describe(cycles(root)[0], root)


def missing_modules(root: Path) -> list[str]:
    """Imports naming a project module that does not exist (e.g. one moved to another
    package): found without running the code, so a rarely run module is checked too."""
    pkgs = packages(root)
    mods = modules(root, pkgs)
    bad = []
    for name, f in modules(root, pkgs).items():
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                wanted = [node.module]
            elif isinstance(node, ast.Import):
                wanted = [a.name for a in node.names]
            else:
                continue
            bad += [f"{f.relative_to(root)}:{node.lineno}: {name} imports {m}, which does not exist"
                    for m in wanted if m.split(".")[0] in pkgs and m not in mods]
    return sorted(bad)


def test_every_project_import_names_a_module_that_exists():
    bad = missing_modules(ROOT)
    assert not bad, "\n".join(bad)
