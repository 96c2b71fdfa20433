"""A real headless Chromium (Debian's package) driven by Playwright."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")


@contextmanager
def chromium(*extra_args: str) -> Iterator:
    """Debian's Chromium, headless, with ``extra_args`` (a fake microphone) besides the usual ones."""
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.exists():
        pytest.fail("Chromium is missing: run `make test` (it installs Debian's chromium package)")
    profile = tempfile.mkdtemp(prefix="sb-chromium-")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync", *extra_args],
        )
        yield browser
        browser.close()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def browser():
    # Module scope: the sync Playwright API keeps an event loop running in the main thread while it
    # is open, which would break every async test collected after the browser tests.
    with chromium() as browser:
        yield browser


@pytest.fixture
def page(browser):
    """A fresh page; a test fails if anything on it broke the Content-Security-Policy it was served with."""
    context = browser.new_context()
    page = context.new_page()
    violations: list[str] = []
    page.on("console", lambda message: violations.append(message.text)
            if "Content Security Policy" in message.text else None)
    yield page
    context.close()
    assert violations == [], violations
