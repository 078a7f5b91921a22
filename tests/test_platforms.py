"""The platforms the guide names: `make lab`'s Python check and Binder's build order, run for real.

The Makefile runs with real `make` on a copy of it in a temporary folder, its PYTHON a stand-in
script that answers as a given Python version would (nothing is downloaded). Binder is replayed in
repo2docker's order: environment.yml alone first, then the repository copied, then postBuild run in
it with a fresh venv's `python`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
MAKE = shutil.which("make")
needs_make = pytest.mark.skipif(MAKE is None, reason="no make on this machine (the README's two commands need it)")


# -- make lab: which Python builds .venv ------------------------------------------------------------------

FAKE_PYTHON = """#!/bin/sh
# A stand-in for Python {version}: answers make's version question, records every other call, and
# makes a venv that says it is {version} (its bin/python is this script again).
echo "$*" >> "{log}"
case "$1" in
  -c) echo "{version}" ;;
  -m) if [ "$2" = venv ]; then
        mkdir -p "$3/bin" && printf 'home = /nowhere\\nversion = {version}.0\\n' > "$3/pyvenv.cfg"
        cp "$0" "$3/bin/python"
      fi ;;
esac
"""


def fake_python(folder: Path, version: str, log: Path) -> Path:
    """A `python3` on PATH in `folder` that answers as Python `version`."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "python3"
    script.write_text(FAKE_PYTHON.format(version=version, log=log))
    script.chmod(0o755)
    return folder


def kit_copy(tmp_path: Path, venv_version: str | None = None) -> Path:
    """The Makefile and pyproject.toml in a folder of their own; a .venv of `venv_version` already there."""
    kit = tmp_path / "kit"
    kit.mkdir()
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, kit / name)
    os.utime(kit / "pyproject.toml", (1_000_000_000, 1_000_000_000))  # older than any stamp
    if venv_version is not None:
        venv = kit / ".venv"
        (venv / "bin").mkdir(parents=True)
        (venv / "pyvenv.cfg").write_text(f"home = /usr/bin\ninclude-system-site-packages = false\n"
                                         f"version = {venv_version}\n")
        (venv / "made-before").write_text("a file of the old .venv\n")
        (venv / ".student-installed").touch()  # its stamp: without a check, make would reuse it
    return kit


def run_make(kit: Path, python_dir: Path, *goals: str) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items()
           if key not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "PYTHON", "VENV")}  # `make test` runs this test
    env["PATH"] = f"{python_dir}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run([MAKE, "--no-print-directory", *goals], cwd=kit, env=env, capture_output=True, text=True,
                          timeout=120)


@needs_make
def test_make_lab_refuses_a_python_older_than_3_11_before_making_venv(tmp_path):
    log = tmp_path / "calls.log"
    kit = kit_copy(tmp_path)
    done = run_make(kit, fake_python(tmp_path / "py39", "3.9", log), "lab")
    assert done.returncode != 0
    assert ("make: python3 is Python 3.9; memkit needs Python 3.11 or newer: choose one, as in "
            "make lab PYTHON=python3.12") in done.stdout.splitlines(), done.stdout + done.stderr
    assert not (kit / ".venv").exists()
    assert all(call.startswith("-c ") for call in log.read_text().splitlines()), log.read_text()  # no venv made


@needs_make
def test_the_refusal_names_the_goal_it_was_given(tmp_path):
    done = run_make(kit_copy(tmp_path), fake_python(tmp_path / "py310", "3.10", tmp_path / "calls.log"), "test")
    assert "make: python3 is Python 3.10; memkit needs Python 3.11 or newer" in done.stdout
    assert "as in make test PYTHON=python3.12" in done.stdout


@needs_make
@pytest.mark.parametrize(("old", "new"), [("3.9.18", "3.12"), ("3.12.1", "3.13")])
def test_a_venv_of_another_python_is_replaced_saying_so(tmp_path, old, new):
    log = tmp_path / "calls.log"
    kit = kit_copy(tmp_path, venv_version=old)
    done = run_make(kit, fake_python(tmp_path / "py", new, log), ".venv/.student-installed")
    assert done.returncode == 0, done.stdout + done.stderr
    old_minor = ".".join(old.split(".")[:2])
    assert f"make: .venv was made by Python {old_minor} and python3 is Python {new}: replacing .venv" in done.stdout
    assert not (kit / ".venv" / "made-before").exists()
    assert f"version = {new}.0" in (kit / ".venv" / "pyvenv.cfg").read_text()
    calls = log.read_text().splitlines()
    assert "-m venv .venv" in calls and "-m pip install --quiet -e .[student]" in calls, calls
    again = run_make(kit, tmp_path / "py", ".venv/.student-installed")  # now the same Python: kept
    assert "replacing" not in again.stdout and "is up to date" in again.stdout, again.stdout


@needs_make
def test_a_venv_of_the_same_python_is_kept(tmp_path):
    log = tmp_path / "calls.log"
    kit = kit_copy(tmp_path, venv_version="3.12.4")
    done = run_make(kit, fake_python(tmp_path / "py", "3.12", log), ".venv/.student-installed")
    assert done.returncode == 0 and "replacing" not in done.stdout and (kit / ".venv" / "made-before").exists()


@needs_make
def test_a_venv_too_old_is_not_removed_by_a_python_too_old_to_replace_it(tmp_path):
    kit = kit_copy(tmp_path, venv_version="3.9.18")
    done = run_make(kit, fake_python(tmp_path / "py", "3.10", tmp_path / "calls.log"), "lab")
    assert done.returncode != 0 and "python3 is Python 3.10; memkit needs Python 3.11 or newer" in done.stdout
    assert (kit / ".venv" / "made-before").exists()  # refused before anything was removed


# -- Binder: repo2docker's order --------------------------------------------------------------------------
# repo2docker (the conda buildpack) reads environment.yml's `python=X.Y` to choose its base environment,
# installs environment.yml BEFORE it copies the repository (unless a pip entry is local, such as `-e .`:
# then the whole install waits for the copy and is redone on every commit), then copies the repository
# and runs postBuild in it.

PYTHON_PIN = re.compile(r"python\s*=+\s*([\d.]*)")  # repo2docker's own pattern for the Python it builds


def _environment() -> dict:
    return yaml.safe_load((ROOT / "environment.yml").read_text())


def test_environment_pins_the_python_repo2docker_reads_and_the_kit_supports():
    from packaging.specifiers import SpecifierSet

    pins = [PYTHON_PIN.match(entry) for entry in _environment()["dependencies"] if isinstance(entry, str)]
    versions = [pin.group(1) for pin in pins if pin]
    assert len(versions) == 1 and re.fullmatch(r"3\.\d+", versions[0]), versions
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert versions[0] + ".0" in SpecifierSet(requires)


def test_environment_needs_nothing_of_the_repository():
    """Each entry installs from a channel or the index: none is a path, a URL or an editable install."""
    from packaging.requirements import Requirement

    for entry in _environment()["dependencies"]:
        for line in entry["pip"] if isinstance(entry, dict) else [entry]:
            assert not line.startswith(("-", ".", "/", "file:", "git+")) and "://" not in line, line
            if isinstance(entry, dict):
                Requirement(line)  # a name and a version range, nothing else


def _tracked_files() -> list[str]:
    return subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.rstrip("\0").split("\0")


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to list the repository's files")
def test_binder_replay_installs_the_kit_in_postbuild(tmp_path):
    # 1. The environment step: environment.yml alone, as repo2docker stages it (checked above: nothing in
    #    it names the repository). Its packages are not installed here (conda-forge is a download).
    staged = tmp_path / "preassemble"
    staged.mkdir()
    shutil.copy(ROOT / "environment.yml", staged / "environment.yml")
    assert sorted(path.name for path in staged.iterdir()) == ["environment.yml"]
    # 2. The repository copied into the image, with the files git tracks.
    repo = tmp_path / "repo"
    for name in _tracked_files():
        if (ROOT / name).is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, repo / name)
    # 3. postBuild in the copy, `python` on PATH a fresh venv of this machine's Python. pip builds the kit
    #    in its own build environment, its setuptools from pip's index as on Binder (`make test` needs the
    #    index too); the kit's dependencies are not installed (--no-deps: environment.yml's job).
    image = tmp_path / "image"
    subprocess.run([sys.executable, "-m", "venv", str(image)], check=True, timeout=300)
    python = image / "bin" / "python"
    env = dict(os.environ, PATH=f"{image / 'bin'}{os.pathsep}{os.environ['PATH']}", PIP_DISABLE_PIP_VERSION_CHECK="1")
    for name in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"):
        env.pop(name, None)
    done = subprocess.run(["bash", str(repo / "postBuild")], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    installed = subprocess.run([str(python), "-c", "import importlib.metadata as m, importlib.util as u; "
                                "print(m.version('memkit-course')); print(u.find_spec('memkit').origin)"],
                               cwd=tmp_path, env=env, capture_output=True, text=True, check=True).stdout.split()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert installed[0] == project["version"] and Path(installed[1]).is_relative_to(repo), installed
    assert (image / "bin" / "memkit").exists()  # the command, as `memkit` in a Binder terminal
    settings = image / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    assert settings.read_text() == (ROOT / ".jupyter" / "lab" / "settings" / "overrides.json").read_text()


# -- the floors `make floors` tests are the floors pyproject.toml states -----------------------------------

def test_make_floors_installs_exactly_the_stated_floors():
    from packaging.requirements import Requirement
    from packaging.version import Version

    floors = re.search(r"^FLOORS := (.+)$", (ROOT / "Makefile").read_text(), re.M).group(1).split()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    stated = [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["notebooks"]]
    lowest = {r.name: min(Version(s.version) for s in r.specifier if s.operator == ">=") for r in stated}
    pinned = {name: Version(version) for name, version in (floor.split("==") for floor in floors)}
    assert pinned and all(pinned[name] == lowest[name] for name in pinned), (pinned, lowest)
    assert {"pandas", "jsonschema"} <= set(pinned)
