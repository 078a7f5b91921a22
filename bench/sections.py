"""RESULTS.md is written by several benchmarks, each owning one `## ` section of it."""

from __future__ import annotations

from pathlib import Path


def write_section(results_md: Path, section: str) -> None:
    """Put `section` (its first line is its `## ` heading) into `results_md` in place of an older
    section of that heading, or at the end: the other sections are kept as they are."""
    heading = section.splitlines()[0]
    text = results_md.read_text(encoding="utf-8") if results_md.exists() else ""
    start = text.find(heading)
    if start >= 0:
        end = text.find("\n## ", start + len(heading))
        text = text[:start] + (text[end + 1:] if end >= 0 else "")
    text = text.rstrip("\n") + ("\n\n" if text.strip() else "") + section.rstrip("\n") + "\n"
    results_md.write_text(text, encoding="utf-8")
