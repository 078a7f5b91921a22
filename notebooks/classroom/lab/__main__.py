"""`python -m classroom.lab MODE`: run one of the lab's workers (see `classroom.lab.workers`).

Python imports the package `classroom.lab` before this module, and the package imports every
concept module, so every worker is registered by the time `main` looks one up.
"""

from __future__ import annotations

from .workers import main

if __name__ == "__main__":
    main()
