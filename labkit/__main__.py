"""``python -m labkit ...``: see `labkit.cli`."""

import sys

from .cli import main

sys.exit(main())
