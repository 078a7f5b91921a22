"""`python -m lab MODE`: run one of the lab's workers, the kit's or the tests' own.

Python imports the package `lab` (which imports every experiment module, and through them
`classroom.lab`) before this module, so every worker is registered by the time `main` looks one up.
"""

from __future__ import annotations

from classroom.lab.workers import main

if __name__ == "__main__":
    main(module="lab")
