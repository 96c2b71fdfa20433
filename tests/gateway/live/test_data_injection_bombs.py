"""A data source answering with a compression bomb: the fetch stops at the decoded-size cap, the
status says why, and the last good data stays."""

from __future__ import annotations

import pytest

from gateway.live.data_injection import RETRIEVED, STATUS, DataInjectionFailed
from tests.fakes.bombs import bomb
from tests.gateway.live.test_data_injection import _configure


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
async def test_a_bombed_answer_fails_with_a_stored_reason(services, data_source, coding):
    await _configure(services, data_source, period="1h")
    await services.live.data_injection.fetch("s1")  # the last good data
    data_source.answer(body=bomb(coding, 30 * 1024 * 1024, b"0"), encoding=coding)

    with pytest.raises(DataInjectionFailed):
        await services.live.data_injection.fetch("s2")

    status = await services.customer_attributes.get(STATUS.name)
    assert status.startswith("failed at ")
    assert status.endswith("request failed: the answer is larger than the limit of 1000000 bytes (decoded)")
    assert await services.customer_attributes.get(RETRIEVED.name) == "Rooms free tonight: 3"
