"""Prompt assembly: a Jinja2 system template, the RAG placeholder, then memory as chat messages."""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources

from jinja2 import StrictUndefined
from jinja2.sandbox import SandboxedEnvironment

from gateway.models import Message, PromptMessage, Role

_CHAT_ROLES = {Role.USER: "user", Role.AGENT: "assistant"}
RAG_PLACEHOLDER = "<||rag_placeholder||>"
NO_RAG = "No additional information"


def replace_rag_placeholder(compiled: str, rag: str) -> str:
    return compiled.replace(RAG_PLACEHOLDER, rag.strip() or NO_RAG)


@dataclass
class AssembledPrompt:
    messages: list[PromptMessage]
    sections: dict[str, dict[str, int | bool]] = field(default_factory=dict)


@dataclass
class PromptInputs:
    persona_id: str
    channel: str
    memory: list[Message]
    rag: str = ""
    variables: dict[str, object] = field(default_factory=dict)


def default_template(name: str) -> str:
    return resources.files("gateway.templates").joinpath(f"{name}.j2").read_text(encoding="utf-8")


class PromptBuilder:
    def __init__(self, agent_name: str = "Switchboard", business_name: str = "our business") -> None:
        self.env = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False)
        self.template = self.env.from_string(default_template("system"))
        self.defaults = {"agent_name": agent_name, "business_name": business_name}

    async def build(self, inputs: PromptInputs) -> AssembledPrompt:
        system = self.template.render(**self.defaults, channel=inputs.channel, **inputs.variables)
        system = replace_rag_placeholder(system, inputs.rag)
        messages = [PromptMessage(role="system", content=system)]
        messages += [
            PromptMessage(role=_CHAT_ROLES[m.role], content=m.text)
            for m in inputs.memory
            if m.role in _CHAT_ROLES
        ]
        return AssembledPrompt(messages=messages)
