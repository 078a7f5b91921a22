"""The kit's two descriptions of its dependencies (pyproject.toml, environment.yml) must agree."""

from __future__ import annotations

import json
import os
import re
import sys
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CONDA_TO_PYPI = {"redis-py": "redis"}  # the few packages conda-forge names differently


def _split(requirement: str) -> tuple[str, str]:
    name, spec = re.match(r"([A-Za-z0-9_.\-\[\]]+)\s*(.*)", requirement.strip()).groups()
    return name.lower(), spec.replace(" ", "")


def _extras() -> dict[str, list[str]]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def extra_requirements(extra: str, seen: frozenset[str] = frozenset()) -> dict[str, str]:
    """The packages an extra installs, following `memkit[...]` references to other extras."""
    found: dict[str, str] = {}
    for item in _extras()[extra]:
        if item.startswith("memkit-course["):
            for inner in item[len("memkit-course["):-1].split(","):
                if inner not in seen:
                    found.update(extra_requirements(inner.strip(), seen | {extra}))
        else:
            found.update([_split(item)])
    return found


def student_requirements() -> dict[str, str]:
    """The student set: the kit's own dependencies and the `student` extra (what `make lab` installs)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return dict(_split(r) for r in project["dependencies"]) | extra_requirements("student")


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


def test_environment_names_the_student_set_of_pyproject():
    environment, _ = environment_requirements()
    assert environment == student_requirements()


def test_the_student_set_leaves_the_development_tools_out_and_all_keeps_them():
    student = student_requirements()
    dev = extra_requirements("dev")
    # pandas is both: a student needs 2.2 or newer, the tests need pandas 3 (the notebooks' stored outputs)
    assert dev and set(dev) & set(student) == {"pandas"}, sorted(set(dev) & set(student))
    assert {"jupyterlab", "redis", "pgserver", "bpe-openai"} <= set(student)
    everything = extra_requirements("all")
    assert set(student) - {"jsonschema"} <= set(everything) and set(dev) <= set(everything)


def test_pandas_floors_are_colabs_for_students_and_pandas_3_for_the_stored_outputs():
    from packaging.specifiers import SpecifierSet

    student, dev = SpecifierSet(student_requirements()["pandas"]), SpecifierSet(extra_requirements("dev")["pandas"])
    assert "2.2.2" in student and "2.2.1" not in student and "3.1.1" in student  # 2.2.2: the first for numpy 2
    assert "2.2.3" not in dev and "3.1.0" in dev


def test_nested_extras_are_followed_and_a_cycle_ends(monkeypatch):
    extras = {"student": ["memkit-course[a]"], "a": ["memkit-course[b]", "x>=1"], "b": ["y>=2", "memkit-course[a]"]}
    monkeypatch.setattr(sys.modules[__name__], "_extras", lambda: extras)
    assert extra_requirements("student") == {"x": ">=1", "y": ">=2"}


def test_environment_uses_conda_forge_and_leaves_the_kit_to_postbuild():
    """Binder installs environment.yml before it copies the repository: the kit is installed by postBuild."""
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert environment["channels"] == ["conda-forge"] and "pip" in environment["dependencies"]
    pip_section = [item["pip"] for item in environment["dependencies"] if isinstance(item, dict)]
    assert pip_section and not any(entry.startswith("-") for entry in pip_section[0])
    post_build = (ROOT / "postBuild").read_text()
    assert "python -m pip install --no-deps --no-cache-dir -e ." in post_build


def test_python_versions_agree():
    """Binder's pinned Python is the oldest the kit supports, so Binder runs the kit at its floor."""
    _, python = environment_requirements()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.11" and python == "=3.11"


def test_console_script_points_at_the_cli():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"] == {"memkit": "memkit.cli:main"}


def _lab_settings_flag() -> str:
    """The JupyterLab option `make lab` passes, with $(CURDIR) resolved to the repository."""
    makefile = (ROOT / "Makefile").read_text()
    flag = re.search(r"^LAB_SETTINGS := (.+)$", makefile, re.M).group(1)
    assert "$(LAB_SETTINGS)" in makefile.split("\nlab:", 1)[1].split("\n\n", 1)[0]
    return flag.replace('"', "").replace("$(CURDIR)", str(ROOT))


def test_make_lab_starts_jupyterlab_without_the_news_prompt(tmp_path):
    """JupyterLab started with make lab's option serves the kit's defaults: no news, no update check."""
    import socket
    import subprocess
    import time
    import urllib.request

    flag = _lab_settings_flag()
    assert flag.startswith("--LabApp.app_settings_dir=") and Path(flag.split("=", 1)[1]).is_dir()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "user"), JUPYTER_RUNTIME_DIR=str(tmp_path / "run"))
    command = [str(Path(sys.executable).with_name("jupyter")), "lab", "--no-browser", flag, f"--port={port}",
               "--ServerApp.ip=127.0.0.1", "--ServerApp.token=t", "--ServerApp.port_retries=0",
               *(["--allow-root"] if os.geteuid() == 0 else []), str(tmp_path)]
    server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/lab/api/settings/@jupyterlab/apputils-extension:notification?token=t"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    schema = json.loads(response.read())["schema"]["properties"]
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "jupyter lab did not answer"
                time.sleep(0.5)
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert schema["fetchNews"]["default"] == "false" and schema["checkForUpdates"]["default"] is False
    assert not (tmp_path / "user").exists() or not any((tmp_path / "user").rglob("*.jupyterlab-settings"))


def test_binder_copies_the_same_settings():
    post_build = (ROOT / "postBuild").read_text()
    assert ".jupyter/lab/settings/overrides.json" in post_build and os.access(ROOT / "postBuild", os.X_OK)


# -- the distribution's own name ----------------------------------------------------------------------
# `memkit` on the public package index is an unrelated project: a hint naming it would install that.
_BARE_HINT = re.compile(r"(?<![\w-])memkit\\?\[(?![.\\])|pip install '?memkit(?![\w-])|uvx memkit(?![\w-])")


def _tracked_text_files() -> list[Path]:
    import subprocess

    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / name for name in names
            if Path(name).suffix in {".py", ".md", ".ipynb", ".toml", ".yml", ".yaml", ".cfg", ".txt", ""}
            and (ROOT / name).is_file()]


def test_no_install_hint_names_the_other_projects_memkit():
    offenders = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
                 for path in _tracked_text_files() if path != Path(__file__).resolve()  # this file shows bad hints
                 for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
                 if _BARE_HINT.search(line)]
    assert offenders == []


def test_the_hint_pattern_tells_the_two_names_apart():
    assert _BARE_HINT.search("pip install 'memkit[mcp]'") and _BARE_HINT.search("uvx memkit mcp")
    assert _BARE_HINT.search("pip install memkit") and _BARE_HINT.search("an extra: memkit[semantic]")
    assert not _BARE_HINT.search("pip install 'memkit-course[mcp]'")
    assert _BARE_HINT.search(r'match=r"memkit\[semantic\]"')  # a test's regex counts too
    assert not _BARE_HINT.search("from memkit[.x] import y") and not _BARE_HINT.search("pip install -e '.[mcp]'")
    assert not _BARE_HINT.search(r"from memkit[\w.]* import")  # a pattern over module names, not a hint


def test_the_distribution_is_named_memkit_course_and_every_hint_uses_it():
    from memkit.errors import DISTRIBUTION, install_hint

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION == "memkit-course"
    assert install_hint("mcp") == "pip install -e '.[mcp]' in the kit's checkout (the distribution memkit-course[mcp])"
    named = {extra for path in (ROOT / "memkit").rglob("*.py")
             for extra in re.findall(r"install_hint\(['\"](\w+)['\"]\)", path.read_text())}
    assert len(named) >= 7 and named <= set(_extras()), named - set(_extras())  # every extra a hint names exists
