"""`python -m memkit.cli`: the same as the `memkit` command."""

import sys

from . import main

sys.exit(main())
