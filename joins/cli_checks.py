"""Checks the command-line tools make before Spark starts: outputs and parameter names.

Outputs never overwrite what a user owns. An existing output is refused; ``force=true``
replaces it only if this harness wrote it: an output folder holds a marker file,
:data:`MARKER`, listing the files written with it (a folder holding any other file is refused,
so a file the user put there is never deleted), and a Parquet file written by a CLI (the
``metrics=`` of ``joins stream``) carries the marker in its key-value metadata. Writability is
tested by really creating the parent folder and a probe file, then removing them
(:mod:`datagen.outputs`; ``os.access`` says yes to root even where nothing can be written).

Unknown algorithm parameters are refused naming the closest valid one. The valid names are
the algorithm's declared parameters (:mod:`joins.declarations`); a batch algorithm's
declaration is checked against the ``ctx.params`` keys its code reads (directly or through
the ``joins`` functions it uses: :func:`code_param_defaults`), so the two cannot drift.
"""

from __future__ import annotations

import ast
import datetime as dt
import difflib
import functools
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from joins.cli_common import CliError

MARKER = "_joins_output.json"  # Spark and pyarrow skip files starting with "_" when reading
METADATA_KEY = b"joins_output"  # the marker in a Parquet file's key-value metadata
_PROJECT = Path(__file__).resolve().parent.parent  # the folder holding the joins package


# ---------------------------------------------------------------------------------- names


def closest(name: str, valid: Iterable[str]) -> str | None:
    """The valid name ``name`` was most likely meant to be, if any is close."""
    match = difflib.get_close_matches(name, list(valid), n=1, cutoff=0.6)
    return match[0] if match else None


def algorithm_params(algo) -> list[str]:
    """The parameter names ``algo`` (a :class:`joins.registry.Algorithm`) reads."""
    return sorted(algorithm_param_defaults(algo))


def algorithm_param_defaults(algo) -> dict[str, str | None]:
    """``algo``'s parameters with their defaults as source text (``"100"``, ``"'exact'"``, a
    derived default's expression), as it declares them: an online operator's
    (:class:`joins.online.operator_spec.Operator`) or a batch algorithm's
    (:class:`joins.declarations.BatchAlgorithm`)."""
    return {n: p.default_source for n, p in algo.declaration().params.items()}


def code_param_defaults(algo) -> dict[str, str | None]:
    """The ``ctx.params`` keys a batch algorithm's code reads (directly or through the
    ``joins`` functions it uses), each with the default its code gives (source text; None
    where it gives none): what its declaration must say (tests/test_cli_checks.py)."""
    module, _, function = algo.target.partition(":")
    return _params_read(module, function)


def check_params(algo, names: Iterable[str]) -> None:
    """Every name in ``names`` is a parameter of ``algo``, else one line naming the closest."""
    valid = algorithm_params(algo)
    for name in names:
        if name not in valid:
            guess = closest(name, valid)
            hint = f"; did you mean param.{guess}?" if guess else ""
            listed = ", ".join(f"param.{v}" for v in valid) or f"none, {algo.name} takes no param.*"
            raise CliError(f"unknown parameter param.{name} for {algo.name}{hint} "
                           f"(valid: {listed})")


def _params_read(module: str, function: str) -> dict[str, str | None]:
    """``ctx.params`` keys read by ``module.function`` and the ``joins`` code it refers to, each
    with its default as source text (None if the code gives none)."""
    keys: dict[str, str | None] = {}
    seen: set[tuple[str, str]] = set()
    todo = [(module, function)]
    while todo:
        mod, name = todo.pop()
        if (mod, name) in seen:
            continue
        seen.add((mod, name))
        info = _module_info(mod)
        node = info["defs"].get(name)
        if node is None:
            continue
        for k, d in _keys_read(node).items():
            if keys.get(k) is None:
                keys[k] = d
        todo.extend(_references(node, mod, info))
    return keys


@functools.cache
def _module_info(module: str) -> dict[str, Any]:
    """A module's top-level functions and classes, and what its imported names refer to."""
    source = _source(module)
    if source is None:
        return {"defs": {}, "objects": {}, "modules": {}}
    tree = ast.parse(source.read_text())
    defs = {n.name: n for n in tree.body
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
    objects: dict[str, tuple[str, str]] = {}  # local name -> (module, name) of a joins object
    modules: dict[str, str] = {}  # local name -> joins module
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.split(".")[0] == "joins":
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if _source(full) is not None:
                    modules[alias.asname or alias.name] = full
                else:
                    objects[alias.asname or alias.name] = (node.module, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "joins" and alias.asname:
                    modules[alias.asname] = alias.name
    return {"defs": defs, "objects": objects, "modules": modules}


def _source(module: str) -> Path | None:
    """The source file of a ``joins`` module, found without importing it (nor pyspark)."""
    base = _PROJECT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _references(node: ast.AST, module: str, info: dict) -> list[tuple[str, str]]:
    """The functions and classes of ``joins`` that ``node`` names (called or passed on)."""
    refs = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            if sub.id in info["defs"]:
                refs.append((module, sub.id))
            elif sub.id in info["objects"]:
                refs.append(info["objects"][sub.id])
        elif isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) \
                and sub.value.id in info["modules"]:
            refs.append((info["modules"][sub.value.id], sub.attr))
    return refs


def _keys_read(node: ast.AST) -> dict[str, str | None]:
    """String keys of ``params.get("k")``, ``params["k"]``, ``"k" in params`` in ``node``, where
    ``params`` is anything named ``params`` (``ctx.params``) or a variable assigned from it;
    each with the default a ``get`` gives it, as source text (None when no ``get`` does)."""
    aliases = {"params"}
    for sub in ast.walk(node):
        if isinstance(sub, ast.Assign) and _mentions(sub.value, aliases):
            aliases |= {t.id for t in sub.targets if isinstance(t, ast.Name)}

    def key(expr: ast.AST) -> str | None:
        return expr.value if isinstance(expr, ast.Constant) and isinstance(expr.value, str) \
            else None

    keys: dict[str, str | None] = {}
    for sub in ast.walk(node):
        found = default = None
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) \
                and sub.func.attr in ("get", "pop", "setdefault") and sub.args \
                and _mentions(sub.func.value, aliases):
            found = key(sub.args[0])
            default = ast.unparse(sub.args[1]) if len(sub.args) > 1 else "None"
        elif isinstance(sub, ast.Subscript) and _mentions(sub.value, aliases):
            found = key(sub.slice)
        elif isinstance(sub, ast.Compare) and len(sub.ops) == 1 \
                and isinstance(sub.ops[0], ast.In | ast.NotIn) \
                and _mentions(sub.comparators[0], aliases):
            found = key(sub.left)
        if found is not None and keys.get(found) is None:
            keys[found] = default
    return keys


def _mentions(expr: ast.AST, aliases: set[str]) -> bool:
    """``expr`` is ``params``, ``x.params``, an alias of them, or wraps one (``dict(params)``)."""
    if isinstance(expr, ast.Name):
        return expr.id in aliases
    if isinstance(expr, ast.Attribute):
        return expr.attr == "params"
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) \
            and expr.func.id in ("dict", "Mapping"):
        return any(_mentions(a, aliases) for a in expr.args)
    return False


# -------------------------------------------------------------------------------- outputs


def probe_writable(path: Path | str) -> None:
    """Create ``path``'s missing parent folders and a probe file in its parent, then remove
    what was created (:func:`datagen.outputs.probe_writable`); a :class:`CliError` if that
    fails."""
    from datagen.errors import GeneratorError
    from datagen.outputs import probe_writable as probe

    try:
        probe(path)
    except GeneratorError as e:
        raise CliError(str(e)) from None


def output_path(option: str, value: str) -> Path:
    """The path given as ``option=value``; an empty one (it would mean ".") is refused."""
    if not value.strip():
        raise CliError(f"{option}= needs a path")
    return Path(value)


def _refuse(path: Path, why: str) -> CliError:
    return CliError(f"output {path} {why}; remove it or choose another path")


def check_output_folder(path: Path | str, force: bool = False) -> bool:
    """A folder output (Spark's Parquet folder): new, or ``force`` and written by this harness.

    True if an existing output of this harness is to be replaced. The parent must be writable.
    """
    path = Path(path)
    replace = False
    if path.exists() or path.is_symlink():
        if not force:
            raise _refuse(path, "exists")
        if not path.is_dir():
            raise _refuse(path, "exists and is not a folder this tool wrote (force=true replaces "
                          f"only a folder with its {MARKER})")
        marker = _read_marker(path)
        if marker is None:
            raise _refuse(path, f"exists and was not written by this tool (no {MARKER} in it; "
                          "force=true replaces only such outputs)")
        foreign = sorted(set(_files(path)) - set(marker.get("files", [])) - {MARKER})
        if foreign:
            more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
            raise _refuse(path, f"holds files this tool did not write ({foreign[0]}{more}); "
                          "force=true would delete them")
        replace = True
    probe_writable(path)
    return replace


def check_output_file(path: Path | str, force: bool = False, what: str = "output") -> bool:
    """A one-file Parquet output (``metrics=``): new, or ``force`` and marked by this harness.

    True if an existing file of this harness is to be replaced. The parent must be writable.
    """
    path = Path(path)
    replace = False
    if path.is_dir():
        raise CliError(f"{what} {path} is a folder; give a file path")
    if path.exists() or path.is_symlink():
        if not force:
            raise CliError(f"{what} {path} exists; remove it or choose another path")
        if not _marked_parquet(path):
            raise CliError(f"{what} {path} exists and was not written by this tool; remove it "
                           "or choose another path (force=true replaces only such files)")
        replace = True
    probe_writable(path)
    return replace


def check_distinct(outputs: dict[str, str | None], inputs: dict[str, str]) -> None:
    """No output is an input, holds one, or lies inside one; no two outputs nest."""
    def real(p: str) -> Path:
        return Path(p).resolve()

    def nested(a: Path, b: Path) -> bool:
        return a == b or a.is_relative_to(b) or b.is_relative_to(a)

    outs = {k: real(v) for k, v in outputs.items() if v}
    for name, out in outs.items():
        for src, p in inputs.items():
            if nested(out, real(p)):
                raise CliError(f"{name}={outputs[name]} overlaps the input {src}={p}; "
                               "choose another path")
    names = list(outs)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if nested(outs[a], outs[b]):
                raise CliError(f"{a}= and {b}= overlap ({outputs[a]}, {outputs[b]}); "
                               "give them separate paths")


def mark_output_folder(path: Path | str, written_by: str, **info: Any) -> None:
    """Write :data:`MARKER` into an output folder this harness just wrote (after its files)."""
    path = Path(path)
    files = sorted(f for f in _files(path) if f != MARKER)
    (path / MARKER).write_text(json.dumps(
        {"written_by": written_by, "created_at": _now(), **info, "files": files},
        indent=1, default=str) + "\n")


def write_marked_parquet(frame, path: Path | str, written_by: str, **info: Any) -> None:
    """``frame`` (pandas) as one Parquet file whose metadata marks it as this harness's."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(frame, preserve_index=False)
    mark = json.dumps({"written_by": written_by, "created_at": _now(), **info}, default=str)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                           METADATA_KEY: mark.encode()})
    pq.write_table(table, str(path))


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _files(folder: Path) -> list[str]:
    """Every file and folder under ``folder``, relative, with "/" separators."""
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")
                  if p.is_file() or p.is_symlink() or not any(p.iterdir()))


def _read_marker(folder: Path) -> dict | None:
    try:
        marker = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) and "written_by" in marker else None


def _marked_parquet(path: Path) -> bool:
    import pyarrow.parquet as pq

    try:
        return METADATA_KEY in (pq.read_schema(str(path)).metadata or {})
    except Exception:  # not Parquet at all: not ours
        return False
