"""No function of the online engine (``joins/online/``) is longer than 60 lines: the engine
is built of named helpers with one job each (issue 39). Run as a script to list the longest:

    python -m tests.online.test_function_lengths [LIMIT] [FOLDER]
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 60


def function_lengths(folder: Path) -> list[tuple[int, str]]:
    """(lines, ``path:line name``) of every function and method under ``folder``, longest
    first; a function's lines run from its ``def`` (decorators included) to its last line."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                where = f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"
                found.append((node.end_lineno - first + 1, where))
    return sorted(found, reverse=True)


def test_no_function_in_the_online_engine_over_60_lines():
    long = [f"{n} {where}" for n, where in function_lengths(ROOT / "joins" / "online")
            if n > LIMIT]
    assert not long, "split into named helpers:\n" + "\n".join(long)


if __name__ == "__main__":
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else LIMIT
    folder = ROOT / (sys.argv[2] if len(sys.argv) > 2 else "joins/online")
    for n, where in function_lengths(folder):
        if n > limit:
            print(n, where)
