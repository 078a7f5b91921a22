"""`python -m memkit.lab MODE`: run one of the lab's workers (see `memkit.lab.workers`).

Python imports the package `memkit.lab` before this module, and the package imports every
concept module, so every worker is registered by the time `main` looks one up.
"""

from __future__ import annotations

from .workers import main

if __name__ == "__main__":
    main()
