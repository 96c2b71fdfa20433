"""Media sent to the Telegram bot (issue 44): a voice note is transcribed by the speech server and answered
from the knowledge base; a photo reaches a vision model as a data-URL image; a PDF is read for the
conversation and never enters a knowledge base; oversized media is refused at once; nothing is left on disk."""

from __future__ import annotations

import base64
import io
import time

import pytest
from PIL import Image

from gateway.core.models import Role
from tests.channels import vendors
from tests.channels.conftest import settle, wait_until
from tests.fakes import media_files

ADMIN = {"Authorization": "Bearer admin-secret"}
HOURS = [{"source": "hours", "title": "Opening hours", "facts": ["Mon-Fri 9:00-18:00"],
          "summary": "The shop is open Monday to Friday from 9:00 to 18:00."}]
MIB = 1024 * 1024


@pytest.fixture
def knowledge(client) -> None:
    assert client.post("/api/kb/topics", json=HOURS, headers=ADMIN).status_code == 201


def _voice(file_id: str, size: int | None, seconds: int = 3) -> dict:
    voice = {"file_id": file_id, "file_unique_id": f"u-{file_id}", "duration": seconds, "mime_type": "audio/ogg"}
    if size is not None:
        voice["file_size"] = size
    return vendors.telegram_update(vendors.telegram_message(voice=voice))


def _files_under(live) -> list[str]:
    root = live.services.settings.data_dir
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()
                  if b"OggS" in p.read_bytes()[:4] or p.suffix in (".ogg", ".png", ".pdf", ".jpg"))


def test_a_voice_note_is_transcribed_and_answered_from_the_knowledge_base(
        client, live, knowledge, fake_telegram, fake_openai, stored):
    note = media_files.ogg_opus(3.2)
    fake_telegram.files["voice-1"] = note
    vendors.post_telegram(client, _voice("voice-1", len(note)))
    settle(live)
    [heard] = fake_openai.audio_requests()
    assert heard["path"] == "/v1/audio/transcriptions"
    assert heard["body"]["model"] == "whisper-1" and heard["body"]["bytes"] == len(note)
    assert heard["body"]["content_type"] == "audio/ogg"  # sniffed from the bytes
    [chat] = fake_openai.chat_requests()
    said = [m["content"] for m in chat["body"]["messages"]]
    assert said[-1] == "What are your opening hours?"
    assert any("Monday to Friday from 9:00 to 18:00" in m for m in said[:-1])  # the knowledge base's answer
    assert fake_telegram.sent_texts() == ["echo: What are your opening hours?"]
    user, agent = stored.messages(f"telegram:{vendors.USER_ID}")
    assert user.role is Role.USER and user.text == "What are your opening hours?"
    assert user.media == "a voice note, transcribed (3.0 s, whisper-1)"  # the vendor's word on its length
    [trace] = stored.traces(agent)
    assert trace.media == ["a voice note, transcribed (3.0 s, whisper-1)"]
    assert [name for name, _ in fake_telegram.served] == ["voice-1"]
    assert "file/bot" not in stored.all_values() and fake_telegram.token not in stored.all_values()
    assert _files_under(live) == []  # nothing kept on disk


def test_a_30_mb_voice_note_is_refused_within_a_second_and_not_downloaded(client, live, fake_telegram, fake_openai,
                                                                          stored):
    fake_telegram.files["huge"] = bytes(30 * MIB)
    started = time.monotonic()
    vendors.post_telegram(client, _voice("huge", 30 * MIB))
    [answer] = wait_until(lambda: fake_telegram.sent_texts(), 5, "the polite answer")
    assert time.monotonic() - started < 1.0
    assert "too large" in answer and "20 MB" in answer
    assert fake_telegram.recorder.received("getFile") == [] and fake_telegram.served == []
    assert fake_openai.audio_requests() == [] and fake_openai.chat_requests() == []
    settle(live)
    user, agent = stored.messages(f"telegram:{vendors.USER_ID}")
    assert user.text == "[a voice note]" and agent.text == answer


@pytest.mark.parametrize("sized", [True, False], ids=["content-length", "chunked"])
def test_a_file_larger_than_it_said_is_stopped_at_the_cap(sized, client, live, fake_telegram, fake_openai):
    fake_telegram.files["liar"] = bytes(30 * MIB)
    if not sized:
        fake_telegram.unsized.add("liar")
    started = time.monotonic()
    vendors.post_telegram(client, _voice("liar", None))  # no declared size: the download itself is capped
    [answer] = wait_until(lambda: fake_telegram.sent_texts(), 5, "the polite answer")
    assert time.monotonic() - started < 1.0 and "too large" in answer
    [(_, sent)] = fake_telegram.served
    assert sent <= 21 * MIB  # the reading stopped at the cap (20 MB) with at most what was in flight
    assert fake_openai.audio_requests() == []


@pytest.fixture
def channel_overrides() -> dict:
    return {"stt_max_seconds": 60, "retrieval_strategy": "hybrid"}  # hybrid: no model call to select topics


def test_a_voice_note_longer_than_the_cap_is_refused_before_download(client, live, fake_telegram, fake_openai):
    fake_telegram.files["long"] = media_files.ogg_opus(2)
    vendors.post_telegram(client, _voice("long", 900, seconds=61))
    [answer] = wait_until(lambda: fake_telegram.sent_texts(), 5, "the polite answer")
    assert "too long" in answer and "60 seconds" in answer
    assert fake_telegram.served == [] and fake_openai.audio_requests() == []


def _photo(file_id: str, caption: str | None = None) -> dict:
    extra = {"caption": caption} if caption else {}
    return vendors.telegram_update(vendors.telegram_message(photo=[
        {"file_id": file_id, "file_unique_id": f"u-{file_id}", "width": 640, "height": 480}], **extra))


def test_a_photo_reaches_a_vision_model_as_a_data_url_image(client, live, knowledge, fake_telegram, fake_openai,
                                                            stored):
    agent_id = live.services.settings.agent_id
    assert client.patch(f"/v1/agents/{agent_id}", headers=ADMIN, json={"config": {"vision": True}}).status_code == 200
    fake_telegram.files["photo-1"] = media_files.png(640, 480)
    vendors.post_telegram(client, _photo("photo-1", "Is this part still sold?"))
    settle(live)
    [image] = fake_openai.image_parts()
    assert image.startswith("data:image/jpeg;base64,") and "file/bot" not in image
    seen = Image.open(io.BytesIO(base64.b64decode(image.split(",", 1)[1])))
    assert seen.format == "JPEG" and seen.size == (640, 480)
    [chat] = fake_openai.chat_requests()
    user = chat["body"]["messages"][-1]["content"]
    assert user[0] == {"type": "text", "text": "Is this part still sold?"}
    assert fake_telegram.sent_texts() == ["echo: Is this part still sold? [image]"]
    [message, agent] = stored.messages(f"telegram:{vendors.USER_ID}")
    assert message.text == "Is this part still sold?" and message.media == "a photo, shown to the model"
    [trace] = stored.traces(agent)
    assert "base64" not in trace.model_dump_json()  # the image is never stored
    assert _files_under(live) == []


def test_a_photo_without_caption_is_described_once_for_retrieval(client, live, fake_telegram, fake_openai, stored):
    agent_id = live.services.settings.agent_id
    assert client.patch(f"/v1/agents/{agent_id}", headers=ADMIN, json={"config": {"vision": True}}).status_code == 200
    fake_telegram.files["photo-2"] = media_files.png()
    fake_openai.script_reply("A red square plastic cover.")
    fake_openai.script_reply("That looks like our cover, part 17.")
    vendors.post_telegram(client, _photo("photo-2"))
    settle(live)
    described, answered = fake_openai.chat_requests()
    assert described["body"]["messages"][-1]["content"][0]["type"] == "image_url"
    assert answered["body"]["messages"][-1]["content"][0]["text"] == "(a photo: A red square plastic cover.)"
    assert len(fake_openai.image_parts()) == 2
    [message, agent] = stored.messages(f"telegram:{vendors.USER_ID}")
    assert message.text == "(a photo: A red square plastic cover.)"
    [trace] = stored.traces(agent)
    assert [c.kind for c in trace.model_calls] == ["image_description"]


def test_a_photo_without_caption_is_described_by_the_agents_own_model(client, live, fake_telegram, fake_openai,
                                                                      stored):
    agent_id = live.services.settings.agent_id
    default_model = live.services.settings.llm_model
    patched = client.patch(f"/v1/agents/{agent_id}", headers=ADMIN,
                           json={"config": {"vision": True, "llmModelId": "vision-model-of-the-agent"}})
    assert patched.status_code == 200, patched.text
    fake_telegram.files["photo-3"] = media_files.png()
    fake_openai.script_reply("A blue bicycle bell.")
    vendors.post_telegram(client, _photo("photo-3"))
    settle(live)
    described, reply = fake_openai.chat_requests()
    assert described["body"]["messages"][-1]["content"][0]["type"] == "image_url"
    assert described["body"]["model"] == "vision-model-of-the-agent" != default_model
    # the reply, which shows the model the photo, goes to that model too, not to the gateway's default
    assert any(isinstance(m["content"], list) for m in reply["body"]["messages"])
    assert reply["body"]["model"] == "vision-model-of-the-agent"
    [_, agent] = stored.messages(f"telegram:{vendors.USER_ID}")
    [trace] = stored.traces(agent)
    assert [(c.kind, c.model) for c in trace.model_calls] == [("image_description", "vision-model-of-the-agent")]
    assert trace.model == "vision-model-of-the-agent"


def test_a_photo_to_an_agent_without_vision_gets_the_polite_text(client, live, fake_telegram, fake_openai, stored):
    fake_telegram.files["photo-3"] = media_files.png()
    vendors.post_telegram(client, _photo("photo-3"))
    settle(live)
    [answer] = fake_telegram.sent_texts()
    assert "can't see photos" in answer
    assert fake_openai.chat_requests() == [] and fake_telegram.served == []
    user, _ = stored.messages(f"telegram:{vendors.USER_ID}")
    assert user.text == "[a photo]"


def test_a_captioned_photo_to_an_agent_without_vision_answers_the_caption(client, live, fake_telegram, fake_openai,
                                                                         stored):
    fake_telegram.files["photo-4"] = media_files.png()
    vendors.post_telegram(client, _photo("photo-4", "Do you repair these?"))
    settle(live)
    [chat] = fake_openai.chat_requests()
    said = chat["body"]["messages"][-1]["content"]
    assert said.startswith("Do you repair these?") and "a photo, which you cannot see" in said
    assert fake_openai.image_parts() == [] and fake_telegram.served == []  # never downloaded
    user, _ = stored.messages(f"telegram:{vendors.USER_ID}")
    assert user.text == "Do you repair these?"
    assert user.media == "a photo, not shown to the model (config.vision is off)"


def _document(file_id: str, name: str, caption: str | None = None) -> dict:
    extra = {"caption": caption} if caption else {}
    return vendors.telegram_update(vendors.telegram_message(document={
        "file_id": file_id, "file_unique_id": f"u-{file_id}", "file_name": name, "mime_type": "application/pdf"},
        **extra))


def test_a_pdf_is_answered_from_its_content_and_never_searchable(client, live, fake_telegram, fake_openai, stored):
    fake_telegram.files["pdf-1"] = media_files.pdf(["Invoice 4711", "Total due: 129.90 EUR by 15 December"])
    vendors.post_telegram(client, _document("pdf-1", "invoice.pdf", "When is this due?"))
    settle(live)
    [chat] = fake_openai.chat_requests()
    user = chat["body"]["messages"][-1]["content"]
    assert user.startswith("When is this due?") and "Total due: 129.90 EUR by 15 December" in user
    assert 'document "invoice.pdf"' in user and user.count("Total due") == 1
    [message, agent] = stored.messages(f"telegram:{vendors.USER_ID}")
    assert message.text == "When is this due?" and "invoice.pdf" in message.media
    assert [m.text for m in stored.messages(f"telegram:{vendors.USER_ID}")].count("When is this due?") == 1
    vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message("And the invoice number?")))
    settle(live)
    follow_up = fake_openai.chat_requests()[-1]["body"]["messages"][-1]["content"]
    assert follow_up.startswith("And the invoice number?") and "Invoice 4711" in follow_up  # kept for the chat
    found = client.post("/api/kb/search", headers=ADMIN, json={"query": "Invoice 4711 total due"}).json()
    assert found["results"] == []
    assert client.get("/api/kb/topics", headers=ADMIN).json()["total"] == 0
    assert _files_under(live) == []


def test_an_unreadable_document_gets_a_clear_answer(client, live, fake_telegram, fake_openai):
    fake_telegram.files["broken"] = b"%PDF-1.7\n" + bytes(range(256)) * 40  # a PDF by its bytes, unreadable
    vendors.post_telegram(client, _document("broken", "broken.pdf"))
    settle(live)
    [answer] = fake_telegram.sent_texts()
    assert "could not read that file" in answer
    assert fake_openai.chat_requests() == []


def test_a_docx_bomb_gets_a_clear_answer_not_a_stuck_turn(client, live, fake_telegram, fake_openai):
    from tests.gateway.knowledge.test_hostile_documents import docx

    fake_telegram.files["bomb"] = docx("Bikes " * 5_000_000)  # 30 MB of XML in ~50 KB
    started = time.monotonic()
    update = vendors.telegram_update(vendors.telegram_message(document={
        "file_id": "bomb", "file_unique_id": "u-bomb", "file_name": "bomb.docx",
        "mime_type": "application/vnd.openxmlformats-officedocument.wordprocessingml.document"}))
    vendors.post_telegram(client, update)
    [answer] = wait_until(lambda: fake_telegram.sent_texts(), 10, "the answer")
    assert "could not read that file" in answer and time.monotonic() - started < 10
    assert fake_openai.chat_requests() == []
