"""The documentation cannot drift from the code: every setting is described, and every setting the code
names is in the generated settings reference. (`make test` also runs `mkdocs build --strict`.)"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from gateway.core.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
CODE = ("gateway", "channels", "rag_core", "admin_ui")
NAME = re.compile(r"SWITCHBOARD_[A-Z0-9_]*[A-Z0-9](_\*)?")


def _reference():
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "docs" / "hooks" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_setting_has_a_description():
    missing = [name for name, field in Settings.model_fields.items() if not (field.description or "").strip()]
    assert missing == [], f"settings without Field(description=...): {missing}"


def test_every_setting_the_code_names_is_in_the_reference():
    page = _reference().settings_markdown()
    documented = set(re.findall(r"`(SWITCHBOARD_[A-Z0-9_]+)`", page.split("## ", 1)[1]))
    named: dict[str, str] = {}
    for package in CODE:
        for path in (ROOT / package).rglob("*"):
            if path.suffix in {".py", ".html", ".js", ".txt"}:
                for match in NAME.finditer(path.read_text(encoding="utf-8", errors="replace")):
                    named.setdefault(match.group(), str(path.relative_to(ROOT)))
    assert "SWITCHBOARD_REDIS_URL" in named  # the scan found the code
    undocumented = {
        name: where for name, where in named.items()
        if (not any(d.startswith(name[:-1]) for d in documented) if name.endswith("_*") else name not in documented)
    }
    assert undocumented == {}, f"named in the code, missing from docs/reference/settings: {undocumented}"


def test_the_reference_lists_each_setting_once_with_its_default_and_description():
    page = _reference().settings_markdown()
    for name, field in Settings.model_fields.items():
        rows = [line for line in page.splitlines() if line.startswith(f"| `SWITCHBOARD_{name.upper()}`")]
        assert len(rows) == 1, name
        assert field.description.split("`")[0].strip()[:20] in rows[0]
    row = next(line for line in page.splitlines() if line.startswith("| `SWITCHBOARD_LLM_API_KEY`"))
    assert "`OPENAI_API_KEY`" in row and "| unset |" in row
    assert "| `SWITCHBOARD_DATA_DIR` | path | `./data` |" in page


def test_the_settings_sections_name_real_settings():
    assert set(_reference().SECTIONS) <= set(Settings.model_fields)



def test_the_readme_is_a_front_door_whose_links_exist():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    assert "make run" in readme and "make test" in readme
    for target in re.findall(r"\]\(((?!https?:|#|mailto:)[^)#\s]+)", readme):
        assert (ROOT / target).exists(), f"README links to a missing file: {target}"


MARKDOWN_LINK = re.compile(r"\]\(((?!https?:|#|mailto:)[^)#\s]+)(#[^)\s]*)?\)")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
BARE_COMMAND = re.compile(r"(?:^\s*(?:\$\s*)?|\|\s*)(switchboard|python -m gateway|mkdocs|pytest|ruff|lint-imports)\s")
DOCKER_SECTION = re.compile(r"^## [^\n]*Docker.*?(?=^## |\Z)", re.S | re.M)  # commands inside a container


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_every_link_in_the_docs_resolves_when_read_in_the_repository():
    """The site's generated pages (docs/hooks/reference.py) stand in the repository as short pages saying
    where their content comes from, so a link to them works in both places."""
    broken = []
    for page in _pages():
        for target, _ in MARKDOWN_LINK.findall(page.read_text(encoding="utf-8")):
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert broken == []


def test_the_generated_pages_have_a_repository_stand_in_that_the_build_replaces():
    reference = _reference()
    for name, generated in {"settings": reference.settings_markdown(), "cli": reference.cli_markdown()}.items():
        stand_in = (ROOT / "docs" / "reference" / f"{name}.md").read_text(encoding="utf-8")
        assert "generated" in stand_in and "docs/hooks/reference.py" in stand_in
        assert stand_in.splitlines()[0] == generated.splitlines()[0]  # the same title in both places
    assert (ROOT / "docs" / "reference" / "http-api.md").read_text(encoding="utf-8").startswith("# HTTP API\n")


def test_commands_in_the_docs_run_from_a_fresh_checkout():
    """`make run` installs into .venv without activating it: a command a reader copies is a make target
    or names the venv's copy (`.venv/bin/switchboard`)."""
    bare = []
    for page in _pages():
        text = page.read_text(encoding="utf-8")
        for block in FENCE.findall(DOCKER_SECTION.sub("", text)):
            bare += [f"{page.relative_to(ROOT)}: {line.strip()}" for line in block.splitlines()
                     if BARE_COMMAND.search(line)]
        if page.name == "README.md" or page.parent.name == "getting-started":  # the newcomer's path, prose too
            prose = FENCE.sub("", DOCKER_SECTION.sub("", text))
            bare += [f"{page.relative_to(ROOT)}: `{span}`" for span in re.findall(r"`([^`\n]+)`", prose)
                     if BARE_COMMAND.match(span + " ")]
    assert bare == []
