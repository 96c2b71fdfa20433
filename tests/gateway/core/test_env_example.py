"""`.env.example` documents every setting the gateway reads."""

from __future__ import annotations

from pathlib import Path

from gateway.core.settings import Settings

ROOT = Path(__file__).resolve().parents[3]


def test_every_setting_is_listed_in_env_example():
    text = (ROOT / ".env.example").read_text()
    missing = [n for n in Settings.model_fields if f"SWITCHBOARD_{n.upper()}=" not in text]
    assert missing == []
