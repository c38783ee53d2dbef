"""Entry point of ``python -m datagen`` (see :mod:`datagen.cli`)."""

import sys

from datagen.cli import main

sys.exit(main())
