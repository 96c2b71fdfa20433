"""WhatsApp message templates: what an operator sends to re-open a conversation past its 24-hour window.

Listed from the account (``GET /{waba_id}/message_templates``, approved ones only) and sent as a
``template`` message from the connection's number. Only templates without variables are offered: the
console has no form to fill ``{{1}}`` placeholders, and Meta refuses a template sent without them.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from channels.errors import ChannelRejected, ChannelUnavailable
from channels.meta.graph import Graph
from gateway.channel import Connection, MessageTemplate

__all__ = ["approved_templates", "template_message"]


class _Component(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: str = ""
    text: str | None = None


class _Template(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str
    language: str
    status: str = ""
    components: list[_Component] = Field(default_factory=list)

    def body(self) -> str:
        return next((c.text or "" for c in self.components if c.type.upper() == "BODY"), "")

    def fillable(self) -> bool:
        return not any("{{" in (c.text or "") for c in self.components)


async def approved_templates(graph: Graph, connection: Connection) -> list[MessageTemplate]:
    waba = connection.secret("waba_id")
    if not waba:
        raise ChannelRejected("add the WhatsApp Business Account ID (waba_id) to the connection to list its "
                              "message templates")
    answer = await graph.call("GET", f"{waba}/message_templates", connection.secret("access_token"),
                              params={"status": "APPROVED", "fields": "name,language,status,components",
                                      "limit": "100"}, what="message_templates")
    try:
        listed = [_Template.model_validate(t) for t in answer.get("data", [])]
    except ValidationError as exc:
        raise ChannelUnavailable(f"Meta message_templates: an answer not understood "
                                 f"({exc.error_count()} errors)") from exc
    return [MessageTemplate(t.name, t.language, t.body()) for t in listed if t.status == "APPROVED" and t.fillable()]


def template_message(to: str, template: MessageTemplate) -> dict:
    return {"messaging_product": "whatsapp", "recipient_type": "individual", "to": to, "type": "template",
            "template": {"name": template.name, "language": {"code": template.language}}}
