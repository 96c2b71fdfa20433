"""``switchboard kb ...`` and ``switchboard eval retrieval ...``.

Local-mode Qdrant can be opened by one process only, so when a gateway answers at
``SWITCHBOARD_PUBLIC_URL`` the ``kb`` commands go through its admin API; otherwise they open the
knowledge base under the data dir directly. Both paths end in the same ``KnowledgeBase`` calls.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

import httpx

from gateway.cli import kb_documents
from gateway.core.settings import Settings


class _Remote:
    def __init__(self, settings: Settings) -> None:
        token = settings.admin_token.get_secret_value() if settings.admin_token else None
        if token is None:
            raise SystemExit(
                "a gateway is running on these settings; set SWITCHBOARD_ADMIN_TOKEN so the CLI can use its admin API"
            )
        self.http = httpx.Client(
            base_url=settings.public_url, headers={"Authorization": f"Bearer {token}"}, timeout=600
        )

    def call(self, method: str, path: str, *, allow_status: tuple[int, ...] = (), **kwargs) -> dict | None:
        resp = self.http.request(method, path, **kwargs)
        if resp.status_code == 204:
            return None
        body = resp.json()
        if not resp.is_success and resp.status_code not in allow_status:
            raise SystemExit(f"error {resp.status_code}: {body.get('message', body)}")
        return body


def _running(settings: Settings) -> bool:
    try:
        return httpx.get(f"{settings.public_url}/healthz", timeout=1.0).is_success
    except httpx.HTTPError:
        return False


async def _local(settings: Settings, action, *args):
    from gateway.knowledge.search import Knowledge

    knowledge = Knowledge(settings, None)
    try:
        return await action(knowledge, *args)
    finally:
        knowledge.close()


def _print_report(report: dict) -> int:
    print(
        f"imported: {len(report['created'])} created, {len(report['updated'])} updated, "
        f"{len(report['unchanged'])} unchanged ({report['embedded']} embedded)"
    )
    for problem in report["errors"]:
        print(f"  line {problem['line']}: {problem['message']}", file=sys.stderr)
    return 1 if report["errors"] else 0


def _kb(args: argparse.Namespace, settings: Settings) -> int:
    remote = _Remote(settings) if _running(settings) else None
    if args.kb_command in kb_documents.COMMANDS:
        return kb_documents.run(args, settings, remote)
    if args.kb_command == "import":
        from rag_core.ingestion import format_for, import_file

        path: Path = args.file
        if not path.is_file():
            raise SystemExit(f"no such file: {path}")
        fmt = format_for(path)
        if remote:
            report = remote.call("POST", "/api/kb/import", params={"format": fmt}, content=path.read_bytes())
            return _print_report(report)

        async def run(knowledge):
            return (await import_file(knowledge.kb, path, fmt)).model_dump(mode="json")

        return _print_report(asyncio.run(_local(settings, run)))
    if args.kb_command == "list":
        if remote:
            topics = remote.call("GET", "/api/kb/topics", params={"limit": args.limit})["topics"]
        else:
            async def run(knowledge):
                page = await knowledge.kb.list(limit=args.limit)
                return [t.model_dump(mode="json") for t in page.topics]

            topics = asyncio.run(_local(settings, run))
        for topic in topics:
            print(f"{topic['source']}\t{topic['title']}\t{','.join(topic['labels'])}")
        return 0
    if args.kb_command == "search":
        if remote:
            query = {"query": args.query, "strategy": args.strategy, "k": args.k}
            body = remote.call("POST", "/api/kb/search", json=query)
        else:
            async def run(knowledge):
                result = await knowledge.search(args.query, strategy=args.strategy, k=args.k)
                return {"strategy": result.strategy, "results": [
                    {"source": h.topic.source, "title": h.topic.title, "score": h.score} for h in result.hits]}

            body = asyncio.run(_local(settings, run))
        if args.json:
            print(json.dumps(body, indent=2))
        else:
            for hit in body["results"]:
                print(f"{hit['score']:.4f}\t{hit['source']}\t{hit['title']}")
        return 0
    if args.kb_command == "delete":
        if remote:
            remote.call("DELETE", f"/api/kb/topics/{args.source}")
            deleted = True
        else:
            async def run(knowledge):
                return await knowledge.kb.delete(args.source)

            deleted = asyncio.run(_local(settings, run))
        print(f"deleted {args.source}" if deleted else f"no topic with source {args.source!r}")
        return 0 if deleted else 1
    raise SystemExit(f"unknown kb command {args.kb_command!r}")


def register_kb(sub: argparse._SubParsersAction) -> None:
    kb = sub.add_parser("kb", help="manage the knowledge base (import, list, search, delete)")
    kb_sub = kb.add_subparsers(dest="kb_command", required=True)
    imp = kb_sub.add_parser("import", help="import topics from FILE.jsonl or FILE.md (one topic per H1)")
    imp.add_argument("file", type=Path)
    lst = kb_sub.add_parser("list", help="list topics")
    lst.add_argument("--limit", type=int, default=100)
    search = kb_sub.add_parser("search", help="search like a turn does")
    search.add_argument("query")
    search.add_argument("--strategy", default=None)
    search.add_argument("-k", type=int, default=5)
    search.add_argument("--json", action="store_true")
    delete = kb_sub.add_parser("delete", help="delete one topic")
    delete.add_argument("source")
    kb_documents.register(kb_sub)
    kb.set_defaults(func=_kb)


def _eval(args: argparse.Namespace, settings: Settings) -> int:
    from gateway.knowledge.embedding import dense_encoder
    from rag_core.evaluation import evaluate, format_report

    encoder = dense_encoder(settings)

    async def run():
        llm = None
        if settings.llm_configured and args.use_llm:
            from gateway.turn.llm import LLMClient

            llm = LLMClient(settings)
        try:
            return await evaluate(
                args.topics, args.queries, args.strategy, encoder=encoder, generator=llm, limit=args.limit
            )
        finally:
            if llm is not None:
                await llm.aclose()

    report = asyncio.run(run())
    print(json.dumps(report.model_dump(), indent=2) if args.json else format_report(report))
    return 0


def register_eval(sub: argparse._SubParsersAction) -> None:
    ev = sub.add_parser("eval", help="evaluate retrieval on a labelled query set")
    ev_sub = ev.add_subparsers(dest="eval_command", required=True)
    retrieval = ev_sub.add_parser("retrieval", help="hit@1, hit@3, MRR@10, candidate hit@K, latency, prompt size")
    retrieval.add_argument("--topics", type=Path, required=True)
    retrieval.add_argument("--queries", type=Path, required=True)
    retrieval.add_argument("--strategy", default="hybrid")
    retrieval.add_argument("--limit", type=int, default=None, help="evaluate only the first N queries")
    retrieval.add_argument(
        "--use-llm", action="store_true",
        help="LLM strategies call the configured LLM (otherwise a stand-in answers 'none': prompt sizes only)",
    )
    retrieval.add_argument("--json", action="store_true")
    ev.set_defaults(func=_eval)
