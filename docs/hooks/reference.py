"""MkDocs hook: the Reference pages, generated from the code at build time (never hand-copied).

- ``reference/settings.md`` from ``gateway.core.settings.Settings`` (env name, type, default, description);
- ``reference/http-api.md`` (and ``reference/openapi.json``) from the app's OpenAPI document, built with
  test-safe settings (no network, embeddings off, in-memory Qdrant, every channel configured with dummies);
- ``reference/cli.md`` from the ``switchboard`` argparse parser.

``tests/test_docs.py`` imports this module to check the settings reference against the code.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import typing
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import NoneType, UnionType

import annotated_types
from pydantic import SecretStr

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the checkout being documented, whatever package the venv has installed
    sys.path.insert(0, str(ROOT))

from gateway.core.settings import Settings  # noqa: E402

PREFIX = "SWITCHBOARD_"
# Settings sections: the first field of each, in the order of the class. Fields after the last known one
# (appended since) are listed under "More settings" until a heading is added here.
SECTIONS = {
    "agent_id": "Core",
    "llm_base_url": "Language model",
    "embeddings": "Embeddings and retrieval",
    "relevance_threshold": "Retrieval controls",
    "inactivity_timeout_s": "Conversations, Redis and turns",
    "admin_token": "Console, operators and handoff",
    "telegram_bot_token": "Channels",
    "channel_send_tries": "Channel delivery, inbox and messages",
    "feeds_secret": "Prompt, live data and feeds",
    "max_body_bytes": "Request bodies",
    "retrieval_mode": "Knowledge bases, ingestion, crawls and citations",
    "trusted_proxies": "Rate limits",
    "widget_origins": "Exposure",
    "turn_cpu_slots": "Turn speed",
    # appended after LAST_KNOWN: each named, so they stay together under their own heading
    **dict.fromkeys(["media_max_mb", "keep_media", "stt_base_url", "stt_api_key", "stt_model", "stt_max_seconds",
                     "voice_reply", "tts_model", "tts_voice", "chat_document_max_tokens", "media_image_max_px"],
                    "Voice notes, photos and documents in a chat"),
}
LAST_KNOWN = "turn_cpu_slots"


def env_names(name: str) -> list[str]:
    """Every environment name a setting is read from."""
    field = Settings.model_fields[name]
    alias = field.validation_alias
    if alias is not None and hasattr(alias, "choices"):
        return [str(choice) for choice in alias.choices]
    return [PREFIX + name.upper()]


def _type_name(annotation: object) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, UnionType):
        inner = [a for a in args if a is not NoneType]
        return " or ".join(_type_name(a) for a in inner)
    if origin is dict:
        return f"JSON object of {_type_name(args[1])}"
    if origin is list:
        return f"JSON list of {_type_name(args[0])}"
    return {str: "text", int: "integer", float: "number", bool: "boolean", Path: "path",
            SecretStr: "secret"}.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _bounds(metadata: list) -> str:
    signs = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<"}
    parts = [f"{sign} {getattr(m, key)}" for m in metadata for key, sign in signs.items()
             if isinstance(m, getattr(annotated_types, key.capitalize())) and hasattr(m, key)]
    return ", ".join(parts)


def _default(name: str) -> str:
    value = Settings.model_fields[name].get_default(call_default_factory=True)
    if value is None:
        return "unset"
    if isinstance(value, Path):
        return f"`{value if value.is_absolute() else './' + str(value)}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, (dict, list)):
        return f"`{json.dumps(value)}`"
    if value == "":
        return "empty"
    return f"`{value}`"


def _cell(text: str) -> str:
    """A table cell: pipes escaped outside code spans (inside them the table reader already ignores them)."""
    parts = text.replace("\n", " ").split("`")
    return "`".join(part if i % 2 else part.replace("|", "\\|") for i, part in enumerate(parts))


def settings_rows() -> Iterator[tuple[str, str, str, str, str]]:
    """(section, env names, type, default, description) for every setting, in the order of the class."""
    section = ""
    past_last = False
    for name, field in Settings.model_fields.items():
        if name in SECTIONS:
            section = SECTIONS[name]
        elif past_last:
            section = "More settings"
        past_last = past_last or name == LAST_KNOWN
        kind = _type_name(field.annotation)
        bounds = _bounds(field.metadata)
        yield (section, ", ".join(f"`{env}`" for env in env_names(name)), kind + (f" ({bounds})" if bounds else ""),
               _default(name), field.description or "")


def settings_markdown() -> str:
    out = [
        "# Settings",
        "",
        "Every setting is an environment variable (or a line in a `.env` file in the working directory; the",
        "environment wins). Secrets are never logged. JSON-typed settings take a JSON value, e.g.",
        "`SWITCHBOARD_PROMPT_BUDGETS='{\"rag\": 3000}'`. An invalid value stops `switchboard` at start with the",
        "setting's name. This page is generated from `gateway/core/settings.py` when the docs are built.",
        "",
    ]
    section = None
    for row_section, env, kind, default, description in settings_rows():
        if row_section != section:
            section = row_section
            out += ["", f"## {section}", "", "| setting | type | default | description |", "|---|---|---|---|"]
        out.append(f"| {env} | {_cell(kind)} | {_cell(default)} | {_cell(description)} |")
    return "\n".join(out) + "\n"


# -- HTTP API -----------------------------------------------------------------------------------------

API_GROUPS = [  # (path prefix, heading); the first matching prefix wins
    ("/healthz", "Health and metrics"), ("/readyz", "Health and metrics"), ("/metrics", "Health and metrics"),
    ("/api/chat", "Web chat"), ("/chat", "Web chat"), ("/widget.js", "Web chat"),
    ("/channels/", "Channel webhooks"), ("/webhooks/", "Inbound data feeds"),
    ("/api/kb", "Knowledge base (admin)"), ("/api/conversations", "Conversations and handoff (admin)"),
    ("/api/inbox", "Inbox (admin)"), ("/api/keys", "API keys (admin)"),
    ("/api/attributes", "Prompt and live data (admin)"), ("/api/personas", "Prompt and live data (admin)"),
    ("/api/templates", "Prompt and live data (admin)"), ("/api/prompt", "Prompt and live data (admin)"),
    ("/v1/chat", "OpenAI-compatible endpoint"), ("/v1/models", "OpenAI-compatible endpoint"),
    ("/v1/", "Agent API"), ("/admin", "Operator console (HTML pages)"), ("/", "Other"),
]
METHODS = ("get", "post", "put", "patch", "delete")


@contextmanager
def _clean_environment() -> Iterator[None]:
    """The build's own environment (a developer's .env or SWITCHBOARD_API_DOCS=false) must not shape the docs."""
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith(PREFIX) or k == "OPENAI_API_KEY"}
    try:
        yield
    finally:
        os.environ.update(saved)


def openapi_document() -> dict:
    """The app's OpenAPI document with every channel configured; nothing is started or connected."""
    from gateway.http.app import create_app

    with tempfile.TemporaryDirectory() as data_dir, _clean_environment():
        settings = Settings(
            _env_file=None, data_dir=data_dir, embeddings="none", qdrant_url=":memory:",
            redis_url="redis://127.0.0.1:1/0", admin_token="docs", api_docs=True,
            telegram_bot_token="1:docs", telegram_webhook_secret="docs", slack_bot_token="xoxb-docs",
            slack_signing_secret="docs", twilio_account_sid="ACdocs", twilio_auth_token="docs",
        )
        return create_app(settings).openapi()


def _resolve(doc: dict, schema: dict) -> dict:
    while "$ref" in schema:
        schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _schema_type(doc: dict, schema: dict) -> str:
    if "$ref" in schema:
        return f"`{schema['$ref'].rsplit('/', 1)[1]}`"
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " or ".join(_schema_type(doc, s) for s in schema[key] if s.get("type") != "null")
    if schema.get("type") == "array":
        return f"list of {_schema_type(doc, schema.get('items', {}))}"
    if "enum" in schema:
        return " | ".join(f"`{v}`" for v in schema["enum"])
    return schema.get("type", "any")


def _body_lines(doc: dict, body: dict) -> list[str]:
    lines = []
    for content_type, media in body.get("content", {}).items():
        schema = media.get("schema", {})
        lines.append(f"Request body (`{content_type}`): {_schema_type(doc, schema)}")
        props = _resolve(doc, schema).get("properties", {})
        required = set(_resolve(doc, schema).get("required", []))
        if props:
            lines += ["", "| field | type | required | description |", "|---|---|---|---|"]
            for name, prop in props.items():
                description = prop.get("description", "")
                lines.append(f"| `{name}` | {_cell(_schema_type(doc, prop))} | {'yes' if name in required else ''} "
                             f"| {_cell(description)} |")
        lines.append("")
    return lines


def _operation_lines(doc: dict, method: str, path: str, op: dict) -> list[str]:
    lines = [f"### `{method.upper()} {path}`", ""]
    if op.get("summary"):
        lines += [op["summary"], ""]
    if op.get("description"):
        lines += [op["description"].strip(), ""]
    params = op.get("parameters", [])
    if params:
        lines += ["| parameter | in | type | required | description |", "|---|---|---|---|---|"]
        for p in params:
            lines.append(f"| `{p['name']}` | {p['in']} | {_cell(_schema_type(doc, p.get('schema', {})))} "
                         f"| {'yes' if p.get('required') else ''} | {_cell(p.get('description', ''))} |")
        lines.append("")
    if "requestBody" in op:
        lines += _body_lines(doc, op["requestBody"])
    successes, errors = [], []
    for code, response in op.get("responses", {}).items():
        if code.startswith(("2", "3")):
            kinds = ", ".join(f"`{c}`" for c in response.get("content", {}))
            successes.append(f"`{code}`" + (f" {kinds}" if kinds else "") + f": {response.get('description', '')}")
        else:
            errors.append(f"[`{code}`](#errors)")
    if successes:
        lines += ["Answers " + "; ".join(successes) + ".", ""]
    if errors:
        lines += ["Errors: " + ", ".join(errors) + ".", ""]
    return lines


def _error_table(doc: dict) -> list[str]:
    """Each error status once, with what it means (the description the document gives it most often)."""
    said: dict[str, Counter[str]] = {}
    for item in doc["paths"].values():
        for method in METHODS:
            for code, response in item.get(method, {}).get("responses", {}).items():
                if not code.startswith(("2", "3")):
                    said.setdefault(code, Counter())[response.get("description", "")] += 1
    lines = ["## Errors", "", "Errors are JSON, never a traceback: the body is `ErrorBody`, "
             '`{"status": <code>, "error": "<kind>", "message": "<what went wrong>"}`, unless the route\'s own '
             "schema in [openapi.json](openapi.json) says otherwise.", "",
             "| status | meaning |", "|---|---|"]
    lines += [f"| `{code}` | {_cell(said[code].most_common(1)[0][0])} |" for code in sorted(said)]
    return [*lines, ""]


def http_markdown(doc: dict) -> str:
    groups: dict[str, list[str]] = {heading: [] for _, heading in API_GROUPS}
    for path, item in doc["paths"].items():
        heading = next(h for prefix, h in API_GROUPS if path.startswith(prefix))
        for method in METHODS:
            if method in item:
                groups[heading] += _operation_lines(doc, method, path, item[method])
    out = [
        "# HTTP API",
        "",
        f"{doc['info']['title']} {doc['info']['version']}. Generated from the gateway's OpenAPI document when the",
        "docs are built (every channel configured). A running gateway serves the same document at",
        "`/openapi.json` and an interactive explorer at `/docs` (unless `SWITCHBOARD_API_DOCS=false`); this build's",
        "copy is [openapi.json](openapi.json).",
        "",
        "Admin routes take `Authorization: Bearer <SWITCHBOARD_ADMIN_TOKEN>`; the agent API and the OpenAI-compatible",
        "endpoint take an API key (`Authorization: Bearer <key>`).",
        "",
    ]
    out += _error_table(doc)
    for heading, lines in groups.items():
        if lines:
            out += [f"## {heading}", "", *lines]
    return "\n".join(out) + "\n"


# -- CLI ----------------------------------------------------------------------------------------------

def _subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            found += [(name, helps.get(name, ""), sub) for name, sub in action.choices.items()]
    return found


def _command_lines(parser: argparse.ArgumentParser, title: str, help_text: str, depth: int) -> list[str]:
    lines = [f"{'#' * min(depth, 4)} `{title}`", ""]
    if help_text:
        lines += [help_text[0].upper() + help_text[1:] + ("" if help_text.endswith(".") else "."), ""]
    lines += ["```", parser.format_usage().strip().removeprefix("usage: "), "```", ""]
    args = [a for a in parser._actions
            if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]
    if args:
        lines += ["| argument | description | default |", "|---|---|---|"]
        for a in args:
            names = ", ".join(a.option_strings) or a.dest
            choices = f" (one of {', '.join(map(str, a.choices))})" if a.choices else ""
            default = "" if a.default in (None, False, argparse.SUPPRESS) or not a.option_strings else f"`{a.default}`"
            lines.append(f"| `{names}` | {_cell((a.help or '') + choices)} | {_cell(default)} |")
        lines.append("")
    for name, sub_help, sub in _subparsers(parser):
        lines += _command_lines(sub, f"{title} {name}", sub_help, depth + 1)
    return lines


def cli_markdown() -> str:
    from gateway.cli.main import build_parser

    parser = build_parser()
    width, os.environ["COLUMNS"] = os.environ.get("COLUMNS"), "200"  # argparse wraps usage to the terminal
    try:
        commands = [line for name, sub_help, sub in _subparsers(parser)
                    for line in _command_lines(sub, f"switchboard {name}", sub_help, 2)]
    finally:
        if width is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = width
    out = [
        "# Command line",
        "",
        "The `switchboard` command (`python -m gateway` is the same). It reads the same settings as the gateway",
        "(environment and `.env`). Generated from its argument parser when the docs are built.",
        "",
        *commands,
    ]
    return "\n".join(out) + "\n"


# -- MkDocs -------------------------------------------------------------------------------------------

def on_files(files, config):  # noqa: ANN001 - MkDocs hook signature
    from mkdocs.structure.files import File

    document = openapi_document()
    pages = {
        "reference/settings.md": settings_markdown(),
        "reference/http-api.md": http_markdown(document),
        "reference/openapi.json": json.dumps(document, indent=1),
        "reference/cli.md": cli_markdown(),
    }
    for uri, content in pages.items():
        existing = files.get_file_from_path(uri)
        if existing is not None:
            files.remove(existing)
        files.append(File.generated(config, uri, content=content))
    return files


if __name__ == "__main__":  # `.venv/bin/python docs/hooks/reference.py settings|http-api|cli`: one page, printed
    PAGES = {"settings": settings_markdown, "http-api": lambda: http_markdown(openapi_document()), "cli": cli_markdown}
    if len(sys.argv) != 2 or sys.argv[1] not in PAGES:
        sys.exit(f"usage: {sys.argv[0]} {'|'.join(PAGES)}")
    sys.stdout.write(PAGES[sys.argv[1]]())
