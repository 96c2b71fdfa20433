"""``switchboard`` (and ``python -m gateway``): serve, worker, chat, kb, eval."""

from __future__ import annotations

import argparse
import asyncio
import gc
import platform
import sys
import threading
from collections.abc import Sequence

from gateway.connections.key_file import UnusableKeyFile
from gateway.core.logs import configure_logging
from gateway.core.settings import Settings
from gateway.jobs.redis_check import RedisUnreachable, check_redis


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    if settings.redis_url is not None:  # a gateway without its system of record would only answer 503s
        check_redis(settings.redis_url, settings.redis_connect_timeout_s)  # said before seconds of imports
    import uvicorn

    from gateway.http.app import create_app
    from gateway.http.server import serve_options

    if args.demo:
        settings = settings.model_copy(update={"demo": True})
    host = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
    base = f"http://{f'[{host}]' if ':' in host else host}:{args.port}"
    if "public_url" not in settings.model_fields_set:  # unset: the address this server is bound to
        settings = settings.model_copy(update={"public_url": base})
    app = create_app(settings)
    print(f"Switchboard: web chat {base}/chat · console {base}/admin · API docs {base}/docs", flush=True)
    # proxy_headers off: the client address comes from SWITCHBOARD_TRUSTED_PROXIES alone (gateway.core.client_address)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False, proxy_headers=False,
                timeout_graceful_shutdown=int(max(1, settings.shutdown_grace_s)), **serve_options(settings))
    return 0


def _worker(args: argparse.Namespace, settings: Settings) -> int:
    if settings.redis_url is None:
        print(
            "switchboard worker needs SWITCHBOARD_REDIS_URL; with embedded defaults the gateway "
            "runs its jobs in process.",
            file=sys.stderr,
        )
        return 2
    check_redis(settings.redis_url, settings.redis_connect_timeout_s)  # said before seconds of imports
    from rq import Queue

    from gateway.http.plugins import install_worker_plugins
    from gateway.jobs.worker import queue_names
    from gateway.services import Services

    # Turns from the channels' inbox run here too (on the services loop), beside the RQ jobs.
    services = Services.build(settings, run_worker=False, consume_inbox=True)
    install_worker_plugins(services)
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="services-loop", daemon=True).start()
    asyncio.run_coroutine_threadsafe(services.start(), loop).result()
    services.register_jobs(loop)
    gc.collect()
    gc.freeze()  # as in the gateway: full collections must not walk the SDKs and clients built above
    from gateway.jobs.worker import SchedulingWorker

    # Jobs run in this process, on warm services (Qdrant client, embedding model, LLM client):
    # a forked work-horse would have neither the services' event loop nor the loaded model.
    queues = [Queue(name, connection=services.redis_sync) for name in queue_names(settings)]
    worker = SchedulingWorker(queues, connection=services.redis_sync)
    try:
        worker.work(with_scheduler=True, logging_level=settings.log_level)
    finally:
        asyncio.run_coroutine_threadsafe(services.aclose(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
    return 0


def _chat(args: argparse.Namespace, settings: Settings) -> int:
    from gateway.cli.terminal_chat import run_terminal_chat

    return asyncio.run(run_terminal_chat(settings, url=args.url))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="switchboard", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the gateway (HTTP API, channels, web chat, admin UI)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--demo", action="store_true", help="load the demo knowledge base if empty")
    serve.set_defaults(func=_serve)

    worker = sub.add_parser(
        "worker", help="run channel turns, background jobs and timers (needs SWITCHBOARD_REDIS_URL)"
    )
    worker.set_defaults(func=_worker)

    chat = sub.add_parser("chat", help="talk with the agent in the terminal")
    chat.add_argument("--url", default=None, help="a running gateway (default: SWITCHBOARD_PUBLIC_URL)")
    chat.set_defaults(func=_chat)

    for register in _extensions():
        register(sub)
    return parser


def _extensions():
    """Subcommand groups that live with their feature (``kb``, ``eval``)."""
    from gateway.cli.admin import register_admin
    from gateway.cli.connections import register_connections
    from gateway.cli.demo import register_demo
    from gateway.cli.kb import register_eval, register_kb
    from gateway.cli.tools import register_tools

    return (register_kb, register_eval, register_admin, register_demo, register_connections, register_tools)


def main(argv: Sequence[str] | None = None) -> int:
    # The openai SDK names the platform in its first request's headers, and ``platform.platform()``
    # spawns ``uname -p`` for it (once a process, then cached). Spawned from a thread of a process
    # whose other threads are busy (a worker still importing its channels), that spawn stalled for
    # tens of seconds and held the first turn: make it here, while the process has one thread.
    platform.platform()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = Settings.load()
    except Exception as exc:  # pydantic ValidationError: say which setting is wrong, not a traceback
        print(f"switchboard: invalid settings: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, settings.log_json, settings.secret_values())
    try:
        return int(args.func(args, settings) or 0)
    except (RedisUnreachable, UnusableKeyFile) as exc:  # one line, not a traceback: the fix is in the message
        print(f"switchboard: {exc}", file=sys.stderr)
        return 2
