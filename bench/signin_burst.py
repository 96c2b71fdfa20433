"""Concurrent wrong passwords for one console account, as issue 26 item 5 measured them: bursts of 40
and 200 at once from one address. Prints each burst's answers by status (401: the password was
checked; 429: refused before argon2), the process's resident memory before and after, and the
slowest /healthz answer while the burst ran.

    python bench/signin_burst.py [--concurrent-checks N]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx
from pydantic import SecretStr

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gateway.core.settings import Settings  # noqa: E402
from gateway.http.app import create_app  # noqa: E402
from tests.fakes.live_server import LiveServer  # noqa: E402

REDIS_URL = "redis://127.0.0.1:6379/0"


def rss_mb() -> float:
    status = Path("/proc/self/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) / 1024


async def burst(url: str, count: int, address: str) -> Counter:
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=httpx.Limits(max_connections=count)) as client:
        form = await client.get("/admin/login")
        token = form.text.split('name="login_token" value="')[1].split('"')[0]
        client.cookies.clear()
        headers = {"cookie": f"sb_console_login={token}", "x-forwarded-for": address}

        async def one() -> int:
            return (await client.post("/admin/login", headers=headers, data={
                "username": "root", "password": "wrong password!", "login_token": token})).status_code

        return Counter(await asyncio.gather(*(one() for _ in range(count))))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--concurrent-checks", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data:
        settings = Settings(_env_file=None, agent_id="bench" + uuid.uuid4().hex[:8], redis_url=REDIS_URL,
                            qdrant_url=":memory:", embeddings="none", data_dir=Path(data), admin_user="root",
                            admin_password=SecretStr("correct horse battery"), trusted_proxies="127.0.0.1",
                            signin_concurrent_checks=args.concurrent_checks)
        with LiveServer(create_app(settings)) as gw:
            for count, address in ((40, "203.0.113.5"), (200, "203.0.113.6")):
                slowest, done = [0.0], threading.Event()

                def probe(done: threading.Event = done, slowest: list[float] = slowest) -> None:
                    with httpx.Client(base_url=gw.url, timeout=60) as c:
                        while not done.is_set():
                            t0 = time.perf_counter()
                            c.get("/healthz")
                            slowest[0] = max(slowest[0], time.perf_counter() - t0)
                            time.sleep(0.02)

                before = rss_mb()
                prober = threading.Thread(target=probe)
                prober.start()
                t0 = time.perf_counter()
                answers = asyncio.run(burst(gw.url, count, address))
                took = time.perf_counter() - t0
                done.set()
                prober.join()
                print(f"{count:>4} at once: {dict(sorted(answers.items()))} in {took:.2f} s; "
                      f"RSS {before:.0f} -> {rss_mb():.0f} MB; slowest /healthz {slowest[0] * 1000:.0f} ms")


if __name__ == "__main__":
    main()
