"""What a turn's media adds to its prompt (issue 44): images the model sees with the customer's message
(data URLs, for a vision model) and documents sent in the chat (their text, for this turn only)."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.core.models import PromptMessage

__all__ = ["TurnMedia"]


@dataclass(frozen=True)
class TurnMedia:
    images: tuple[str, ...] = ()  # data URLs of downloaded, re-encoded images; never a vendor's URL
    documents: tuple[tuple[str, str], ...] = ()  # (file name, extracted text, already cut to its cap)
    remarks: tuple[str, ...] = ()  # what the model is told about media it does not get (a photo it cannot see)

    def attach(self, messages: list[PromptMessage]) -> list[PromptMessage]:
        """``messages`` with the media on the last user message (the one this turn answers)."""
        at = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "user"), None)
        if at is None:
            return messages
        said = messages[at].content
        for name, text in self.documents:
            said += (f"\n\n[The customer sent the document \"{name}\" in this chat. Its text, for this "
                     f"conversation only:]\n{text}")
        for remark in self.remarks:
            said += f"\n\n{remark}"
        out = list(messages)
        out[at] = PromptMessage(role="user", content=said, images=messages[at].images + self.images)
        return out
