"""How a person on this machine runs the ``switchboard`` command: what hints in logs and pages print."""

from __future__ import annotations

import os
import shutil
import sys
from functools import cache
from pathlib import Path

__all__ = ["cli_command"]


@cache
def cli_command() -> str:
    """``switchboard`` when the shell finds this installation's command on its PATH, else the path to
    it from the working directory (``.venv/bin/switchboard`` after ``make run``)."""
    script = Path(sys.prefix) / ("Scripts" if os.name == "nt" else "bin") / "switchboard"
    found = shutil.which("switchboard")
    if found is not None and Path(found).resolve() == script.resolve():
        return "switchboard"
    if not script.exists():  # not installed as a package (a bare checkout): the module runs the same CLI
        return f"{Path(sys.executable).name} -m gateway"
    try:
        relative = os.path.relpath(script, Path.cwd())
    except ValueError:  # another drive
        return str(script)
    return str(script) if relative.startswith("..") else relative
