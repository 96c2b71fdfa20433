"""Custom prompt sections (the seed's InjectCustomSection / RemoveCustomSection).

Each section lives in the persona's ``custom_prompt_section`` attribute as::

    <name>
    value
    </name>
    ---

and is rendered inside ``<ConversationMeta>``. Names follow XML name rules, so a section can never
break out of its tags; removal matches the name literally (``re.escape``), never as a pattern.
"""

from __future__ import annotations

import re

from gateway.conversation.attributes import CUSTOM_PROMPT_SECTION, PersonaAttributes
from gateway.core.errors import InvalidInput, NotFound

MAX_NAME = 64
MAX_VALUE_CHARS = 20_000
# XML NameStartChar / NameChar (letters incl. non-ASCII, digits, "_", ":", ".", "-", U+00B7).
_NAME = re.compile(r"^[^\W\d][\w.\-:\u00B7]*$")


def validate_section_name(name: str) -> str:
    if not name or len(name) > MAX_NAME:
        raise InvalidInput(f"section name must be 1-{MAX_NAME} characters")
    if not _NAME.match(name) or name.lower().startswith("xml"):
        raise InvalidInput(
            f"section name {name!r} is not an XML name: start with a letter or '_', then letters, "
            "digits, '_', '-', '.', ':'; not starting with 'xml'"
        )
    return name


def render_section(name: str, value: str) -> str:
    return f"<{name}>\n{value.strip()}\n</{name}>\n---\n"


def _pattern(name: str) -> re.Pattern[str]:
    n = re.escape(name)
    return re.compile(rf"<{n}>\n?(.*?)\n?</{n}>\s*---\s*", re.DOTALL)


def parse_sections(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for match in re.finditer(r"<([^\s<>/]+)>\n?(.*?)\n?</\1>\s*---\s*", text, re.DOTALL):
        found[match[1]] = match[2]
    return found


def without_section(text: str, name: str) -> tuple[str, bool]:
    cleaned, count = _pattern(name).subn("", text)
    return cleaned, count > 0


class CustomSections:
    def __init__(self, attributes: PersonaAttributes) -> None:
        self.attributes = attributes

    async def text(self, persona_id: str) -> str:
        return await self.attributes.get(persona_id, CUSTOM_PROMPT_SECTION.name)

    async def all(self, persona_id: str) -> dict[str, str]:
        return parse_sections(await self.text(persona_id))

    async def inject(self, persona_id: str, name: str, value: str) -> dict[str, str]:
        """Add the section; one of the same name is replaced where it stands."""
        validate_section_name(name)
        if len(value) > MAX_VALUE_CHARS:
            raise InvalidInput(f"section value is longer than {MAX_VALUE_CHARS} characters")
        if f"</{name}>" in value:
            raise InvalidInput(f"section value may not contain its own closing tag </{name}>")
        section = render_section(name, value)

        def with_section(current: str) -> str:
            updated, replaced = _pattern(name).subn(lambda _: section, current, count=1)
            return updated if replaced else current + section

        # Atomic: concurrent edits of other sections of this persona are never lost.
        updated = await self.attributes.update(persona_id, CUSTOM_PROMPT_SECTION.name, with_section)
        return parse_sections(updated)

    async def remove(self, persona_id: str, name: str) -> dict[str, str]:
        validate_section_name(name)

        def cleaned(current: str) -> str:
            text, removed = without_section(current, name)
            if not removed:
                raise NotFound(f"persona has no custom section {name!r}")
            return text

        return parse_sections(await self.attributes.update(persona_id, CUSTOM_PROMPT_SECTION.name, cleaned))
