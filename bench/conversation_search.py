"""Conversation search over 10,000 stored conversations: how long the conversation list (the console's
Conversations screen and ``GET /api/conversations?q=``) takes to answer a text filter, by the kind of
query, and what the index costs in Redis memory. Target: every query p95 < 100 ms.

The conversations are written through ``RedisStore`` (the same writes a turn makes, the search index
among them); each query runs ``ConversationList.page`` as the API does (on a Redis client set up as the
gateway's, commands packed by hiredis), 5 times to warm up, then
``--repeat`` times. Redis is a redis-server of the bench's own (``BENCH_REDIS_URL`` to use another).

    python bench/conversation_search.py [--conversations N] [--messages N] [--repeat N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from redis.asyncio import BlockingConnectionPool, Redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gateway.conversation.handoff import Handoffs  # noqa: E402
from gateway.conversation.listing import ConversationList, Filters  # noqa: E402
from gateway.conversation.store import RedisStore  # noqa: E402
from gateway.core.models import Conversation, Message, Role  # noqa: E402
from gateway.core.redis_packing import hiredis_packing  # noqa: E402
from tests.redis_server import RedisServer  # noqa: E402

CHANNELS = ("webchat", "telegram", "slack", "twilio_sms", "twilio_voice")
TOPICS = ("clay", "glaze", "wheel", "course", "membership", "price", "booking", "refund", "studio", "shelf",
          "firing", "pottery", "evening", "weekend", "teacher", "beginner", "voucher", "parking", "tools", "apron")
FILLER = ("the", "a", "is", "do", "you", "have", "can", "i", "what", "when", "how", "much", "and", "for", "on",
          "my", "your", "please", "thanks", "there", "any", "this", "next", "week", "today", "open", "book")
QUERIES = {
    "rare word (kiln, 20 conversations)": {"q": "kiln"},
    "common word (price)": {"q": "price"},
    "stop word (the)": {"q": "the"},
    "prefix (memb)": {"q": "memb"},
    "two words (glaze firing)": {"q": "glaze firing"},
    "word + channel (clay, telegram)": {"q": "clay", "channel": "telegram"},
    "word + status ended (wheel)": {"q": "wheel", "status": "ended"},
    "word, page 3 (studio)": {"q": "studio", "offset": "100"},
    "no match (zeppelin)": {"q": "zeppelin"},
}
# Not a search: the status filter alone reads rows until a page passes, as a status with words does.
COMPARISON = {"status ended, no words (for comparison)": {"status": "ended"}}


def sentence(rng: random.Random) -> str:
    words = [rng.choice(FILLER) for _ in range(rng.randint(4, 10))]
    for _ in range(rng.randint(1, 3)):
        words.insert(rng.randrange(len(words) + 1), rng.choice(TOPICS))
    words += [f"w{rng.randint(0, 20_000)}" for _ in range(rng.randint(0, 2))]  # the long tail of a vocabulary
    return " ".join(words).capitalize() + "?"


async def fill(store: RedisStore, conversations: int, messages: int) -> float:
    """Store the conversations; the write time per message (store writes plus the index's)."""
    rng = random.Random(7)
    start = datetime.now(UTC) - timedelta(days=30)
    kiln = set(rng.sample(range(conversations), 20))
    elapsed = 0.0
    for n in range(0, conversations, 100):
        pipe = store.redis.pipeline(transaction=False)
        for i in range(n, min(n + 100, conversations)):
            at = start + timedelta(minutes=3 * i)
            conversation = Conversation(persona_id=f"p{i:05d}", channel=CHANNELS[i % len(CHANNELS)], started_at=at,
                                        last_activity_at=at, ended_at=at if i % 3 == 0 else None)
            store.save_conversation_into(pipe, conversation)
            for m in range(messages):
                text = sentence(rng)
                if i in kiln and m == 0:
                    text = "How long does kiln firing take for stoneware?"
                store.add_message_into(pipe, Message(
                    conversation_id=conversation.id, persona_id=conversation.persona_id,
                    role=Role.USER if m % 2 == 0 else Role.AGENT, channel=conversation.channel, text=text,
                    created_at=at + timedelta(seconds=m)))
        began = time.perf_counter()
        await pipe.execute()
        elapsed += time.perf_counter() - began
    return 1000 * elapsed / (conversations * messages)


async def bench(url: str, args: argparse.Namespace) -> None:
    redis = Redis(connection_pool=hiredis_packing(BlockingConnectionPool.from_url(url)))  # as the gateway's
    agent = f"bench-search-{os.getpid()}"
    store = RedisStore(redis, agent)
    listing = ConversationList(store, Handoffs(store))
    used_before = (await redis.info("memory"))["used_memory"]
    per_message = await fill(store, args.conversations, args.messages)
    before_index = (await redis.info("memory"))["used_memory"]
    index_keys = [k async for k in redis.scan_iter(store.key("search", "*"), count=10_000)]
    index_bytes = 0
    for n in range(0, len(index_keys), 5000):
        pipe = redis.pipeline(transaction=False)
        for key in index_keys[n:n + 5000]:
            pipe.memory_usage(key)
        index_bytes += sum(b or 0 for b in await pipe.execute())
    print(f"{args.conversations} conversations x {args.messages} messages stored: {per_message:.3f} ms per message "
          f"written (pipelined); Redis memory {(before_index - used_before) / 2**20:.1f} MiB in all, of which the "
          f"search index {index_bytes / 2**20:.1f} MiB ({len(index_keys) - 1} indexed words)")
    print(f"{'query':42} {'rows':>5} {'p50 ms':>8} {'p95 ms':>8}")
    worst = 0.0
    for name, params in {**QUERIES, **COMPARISON}.items():
        filters = Filters.of(params)
        times = []
        for attempt in range(5 + args.repeat):
            began = time.perf_counter()
            rows, _ = await listing.page(filters)
            if attempt >= 5:
                times.append(1000 * (time.perf_counter() - began))
        p95 = sorted(times)[max(0, int(0.95 * len(times)) - 1)]
        worst = max(worst, p95) if name in QUERIES else worst
        print(f"{name:42} {len(rows):>5} {statistics.median(times):>8.2f} {p95:>8.2f}")
    print(f"worst search p95: {worst:.2f} ms (target < 100 ms) -> {'PASS' if worst < 100 else 'FAIL'}")
    keys = [k async for k in redis.scan_iter(f"sb:{agent}:*", count=10_000)]
    for n in range(0, len(keys), 1000):
        await redis.delete(*keys[n:n + 1000])
    await redis.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=40)
    args = parser.parse_args()
    if url := os.environ.get("BENCH_REDIS_URL"):
        asyncio.run(bench(url, args))
        return
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("no redis-server on PATH: install one or set BENCH_REDIS_URL")
    with tempfile.TemporaryDirectory() as directory, RedisServer(binary, Path(directory)) as url:
        asyncio.run(bench(url, args))


if __name__ == "__main__":
    main()
