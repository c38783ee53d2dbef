"""The one error type of the generators: bad input, reported as one clear line (CLI exit 2)."""

from __future__ import annotations


class GeneratorError(ValueError):
    """A request that cannot be generated: unknown generator/parameter/column, bad value, ..."""
