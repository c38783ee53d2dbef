"""Parameters: typed dataclasses with defaults, validated the same way from Python and the CLI.

A generator module declares ``Params`` (a dataclass). :func:`validate` fills defaults, rejects
unknown keys naming the valid ones, and coerces values to the declared types (the CLI passes
strings; ``1e5`` is accepted for an integer). Range checks live in each ``Params.__post_init__``.
"""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from datagen.errors import GeneratorError


def parse_cli_value(text: str) -> Any:
    """``key=value`` text -> Python value: bool, null, int, float, [list], else the string."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("null", "none", "~"):
        return None
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    if text.startswith("[") and text.endswith("]"):
        inner = text[1:-1].strip()
        return [parse_cli_value(t.strip()) for t in inner.split(",")] if inner else []
    return text


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def coerce(name: str, value: Any, tp: Any) -> Any:
    """Convert ``value`` to the annotated type ``tp`` or raise a one-line GeneratorError."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return coerce(name, value, arg)
            except GeneratorError as e:
                errors.append(str(e))
        raise GeneratorError(errors[0] if errors else f"{name}: bad value {value!r}")
    if origin is tuple:
        (item,) = typing.get_args(tp)[:1]
        if isinstance(value, str):
            value = [parse_cli_value(v) for v in value.split(",")] if value else []
        elif not isinstance(value, list | tuple):
            value = [value]
        return tuple(coerce(name, v, item) for v in value)
    if origin is dict or tp is dict:
        if not isinstance(value, Mapping):
            raise GeneratorError(f"{name} must be a mapping, got {value!r}")
        return dict(value)
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
    elif tp is int:
        if isinstance(value, str):
            value = parse_cli_value(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
    elif tp is float:
        if isinstance(value, str):
            value = parse_cli_value(value)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif tp is str:
        if isinstance(value, str):
            return value
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
    elif tp is Any:
        return value
    raise GeneratorError(f"{name} must be {_type_name(tp)}, got {value!r}")


def unknown_keys(where: str, given: Mapping[str, Any], valid: list[str]) -> None:
    bad = sorted(set(given) - set(valid))
    if bad:
        raise GeneratorError(
            f"unknown parameter{'s' if len(bad) > 1 else ''} {', '.join(bad)} for {where}; "
            f"valid: {', '.join(sorted(valid))}"
        )


def validate(cls: type, raw: Mapping[str, Any], where: str) -> Any:
    """An instance of dataclass ``cls`` from ``raw`` (defaults filled, types coerced)."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown_keys(where, raw, list(fields))
    hints = typing.get_type_hints(cls)
    values = {k: coerce(k, v, hints[k]) for k, v in raw.items()}
    return cls(**values)


def signature_params(fn: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    """The keyword-only parameters of ``fn`` (how order functions declare their parameters)."""
    return {
        n: p for n, p in inspect.signature(fn).parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }


def validate_kwargs(fn: Callable[..., Any], raw: Mapping[str, Any], where: str,
                    reserved: tuple[str, ...] = ()) -> dict[str, Any]:
    """``raw`` checked against ``fn``'s keyword-only parameters; defaults filled in."""
    params = {n: p for n, p in signature_params(fn).items() if n not in reserved}
    unknown_keys(where, raw, list(params))
    hints = typing.get_type_hints(fn)
    out = {}
    for n, p in params.items():
        if n in raw:
            out[n] = coerce(n, raw[n], hints.get(n, Any))
        elif p.default is inspect.Parameter.empty:
            raise GeneratorError(f"{where} needs parameter {n}")
        else:
            out[n] = p.default
    return out


def check(cond: bool, message: str) -> None:
    if not cond:
        raise GeneratorError(message)
