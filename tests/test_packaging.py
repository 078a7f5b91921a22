"""The kit's two descriptions of its dependencies (pyproject.toml, environment.yml) must agree."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CONDA_TO_PYPI = {"redis-py": "redis"}  # the few packages conda-forge names differently


def _split(requirement: str) -> tuple[str, str]:
    name, spec = re.match(r"([A-Za-z0-9_.\-\[\]]+)\s*(.*)", requirement.strip()).groups()
    return name.lower(), spec.replace(" ", "")


def pyproject_requirements() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra, items in project["optional-dependencies"].items():
        requirements += [item for item in items if not item.startswith("memkit[")]
    return dict(_split(r) for r in requirements)


def environment_requirements() -> tuple[dict[str, str], str]:
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    found: dict[str, str] = {}
    python = ""
    for item in environment["dependencies"]:
        entries = item["pip"] if isinstance(item, dict) else [item]
        for entry in entries:
            if entry.startswith("-e") or entry == "pip":
                continue
            name, spec = _split(entry)
            if name == "python":
                python = spec
                continue
            found[CONDA_TO_PYPI.get(name, name)] = spec
    return found, python


def test_environment_names_the_same_dependencies_as_pyproject():
    environment, _ = environment_requirements()
    assert environment == pyproject_requirements()


def test_environment_uses_conda_forge_and_installs_the_kit_with_pip():
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert environment["channels"] == ["conda-forge"]
    pip_section = [item["pip"] for item in environment["dependencies"] if isinstance(item, dict)]
    assert pip_section and "-e ." in pip_section[0]


def test_python_versions_agree():
    _, python = environment_requirements()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert python == project["requires-python"] == ">=3.11"


def test_console_script_points_at_the_cli():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"] == {"memkit": "memkit.cli:main"}
