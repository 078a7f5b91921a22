"""`python -m bench`: the runner of `bench.suites`."""

from __future__ import annotations

from .suites import chosen, main, parse_args, save

__all__ = ["chosen", "main", "parse_args", "save"]

if __name__ == "__main__":
    raise SystemExit(main())
