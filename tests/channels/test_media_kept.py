"""SWITCHBOARD_KEEP_MEDIA (issue 44): a downloaded voice note is kept under the data dir for debugging
(off by default: test_media_telegram.py checks nothing is left on disk)."""

from __future__ import annotations

import pytest

from tests.channels import vendors
from tests.channels.conftest import settle
from tests.fakes import media_files


@pytest.fixture
def channel_overrides() -> dict:
    return {"keep_media": True, "retrieval_strategy": "hybrid"}


def test_kept_media_is_written_under_the_data_dir(client, live, fake_telegram, fake_openai):
    note = media_files.ogg_opus(1.5)
    fake_telegram.files["v"] = note
    voice = {"file_id": "v", "file_unique_id": "u-v", "duration": 1, "mime_type": "audio/ogg"}
    vendors.post_telegram(client, vendors.telegram_update(vendors.telegram_message(voice=voice)))
    settle(live)
    [kept] = (live.services.settings.data_dir / "media").iterdir()
    assert kept.suffix == ".ogg" and kept.read_bytes() == note
    assert fake_telegram.sent_texts() == ["echo: What are your opening hours?"]
