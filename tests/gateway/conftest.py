from __future__ import annotations

import pytest

from gateway.services import Services


@pytest.fixture
async def services(settings):
    built = Services.build(settings)
    await built.start()
    yield built
    await built.aclose()
