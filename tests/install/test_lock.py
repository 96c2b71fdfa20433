"""The lock files pin what the code needs, and the code imports only what the package declares."""

from __future__ import annotations

import ast
import importlib.metadata as metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("gateway", "channels", "rag_core", "admin_ui")
PIN = re.compile(r"^([A-Za-z0-9._-]+)==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$")


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _declared(requirements: list[str]) -> set[str]:
    return {canonicalize_name(Requirement(line).name) for line in requirements}


def _pins(lock: Path) -> dict[str, str]:
    """name -> version for the pins that apply to this interpreter and platform."""
    pins: dict[str, str] = {}
    for line in lock.read_text().splitlines():
        match = PIN.match(line)
        if match is None:
            continue
        name, version, marker = match.groups()
        if marker is None or Marker(marker).evaluate():
            pins[canonicalize_name(name)] = version
    return pins


def test_every_runtime_and_dev_dependency_is_pinned_with_hashes():
    runtime, dev = _pins(ROOT / "requirements.lock"), _pins(ROOT / "requirements-dev.lock")
    project = _project()
    assert _declared(project["dependencies"]) <= set(runtime)
    assert _declared(project["dependencies"] + project["optional-dependencies"]["dev"]) <= set(dev)
    for lock in ("requirements.lock", "requirements-dev.lock"):
        text = (ROOT / lock).read_text()
        unhashed = [block.split()[0] for block in re.split(r"\n(?=[A-Za-z0-9])", text)
                    if "==" in block.split("\n")[0] and "--hash=" not in block]
        assert unhashed == [], f"{lock}: pins without hashes"
    # The dev lock never moves a runtime pin: the app tested is the app shipped.
    assert {name: dev[name] for name in runtime} == runtime


@pytest.mark.skipif(not (ROOT / ".venv").is_dir() or Path(sys.prefix) != ROOT / ".venv",
                    reason="checks the venv that `make test` builds")
def test_the_make_venv_matches_the_dev_lock():
    wrong = {name: (version, _installed(name)) for name, version in _pins(ROOT / "requirements-dev.lock").items()
             if _installed(name) != version}
    assert wrong == {}, "installed versions differ from requirements-dev.lock: run `make clean test`"


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _imported_top_levels() -> set[str]:
    names: set[str] = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - set(PACKAGES) - {"__future__"}


def test_every_third_party_import_is_a_declared_runtime_dependency():
    """A module only a dev dependency (or a transitive one) provides breaks the runtime-only install."""
    providers = metadata.packages_distributions()
    declared = _declared(_project()["dependencies"])
    undeclared = {module: providers.get(module, ["(not installed)"]) for module in _imported_top_levels()
                  if not declared & {canonicalize_name(dist) for dist in providers.get(module, [])}}
    assert undeclared == {}
