"""The serving process keeps numpy's BLAS on one thread: OpenBLAS's extra threads busy-wait after every
call and cost a turn more CPU than its own work (gateway/core/blas.py)."""

from __future__ import annotations

import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from gateway.services import Services


def _blas_threads() -> list[int]:
    return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]


@pytest.fixture
def many_blas_threads():
    limits = threadpool_limits(limits=4, user_api="blas")  # as a fresh process on a 4-core machine starts
    yield
    limits.restore_original_limits()


async def test_starting_the_services_puts_blas_on_one_thread(settings, many_blas_threads):
    assert _blas_threads() and set(_blas_threads()) == {4}
    services = Services.build(settings)
    await services.start()
    try:
        assert set(_blas_threads()) == {1}
    finally:
        await services.aclose()
