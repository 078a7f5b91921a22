"""`python -m memkit` runs the `memkit` command."""

import sys

from .cli import main

sys.exit(main())
