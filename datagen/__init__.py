"""Input generators for the skew-join harness: Zipf pairs, small-large, streams, TPC-H.

Use :func:`materialize` (cached by config hash) or the CLI ``python -m datagen``.
"""

from datagen.cache import materialize, read_manifest, table_path
from datagen.errors import GeneratorError

__all__ = ["GeneratorError", "materialize", "read_manifest", "table_path"]
