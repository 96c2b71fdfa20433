"""``switchboard kb`` commands for knowledge bases and documents: bases, create, describe, drop,
ingest (files or directories, with a progress bar), documents, forget, reingest.

Like the topic commands, each goes through a running gateway's admin API when one answers, and
otherwise opens the knowledge base under the data dir; both end in the same ``Knowledge`` calls."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from gateway.core.settings import Settings

COMMANDS = ("bases", "create", "describe", "drop", "ingest", "documents", "forget", "reingest", "crawl")


def _chunking_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--chunking", choices=["recursive", "paragraph", "sentence", "fixed"], default=None)
    parser.add_argument("--chunk-tokens", type=int, default=None)
    parser.add_argument("--overlap-tokens", type=int, default=None)


def _chunking(args: argparse.Namespace) -> dict[str, Any] | None:
    given = {"strategy": args.chunking, "chunk_tokens": args.chunk_tokens, "overlap_tokens": args.overlap_tokens}
    return {k: v for k, v in given.items() if v is not None} or None


def register(kb_sub: argparse._SubParsersAction) -> None:
    kb_sub.add_parser("bases", help="list the knowledge bases with their counts")
    create = kb_sub.add_parser("create", help="create a knowledge base")
    create.add_argument("name")
    create.add_argument("--description", default="")
    _chunking_args(create)
    describe = kb_sub.add_parser("describe", help="counts, documents, embedding model and last sync of one base")
    describe.add_argument("--kb", default="main")
    drop = kb_sub.add_parser("drop", help="delete a knowledge base and everything in it")
    drop.add_argument("name")
    ingest = kb_sub.add_parser("ingest", help="ingest documents: a file, or a directory (--recursive)")
    ingest.add_argument("path", type=Path)
    ingest.add_argument("--kb", default="main")
    ingest.add_argument("--recursive", action="store_true", help="include sub-directories")
    ingest.add_argument("--ext", default=None, help="only these extensions, comma-separated, e.g. .pdf,.md")
    ingest.add_argument("--row-template", default=None, help="CSV/JSON records: e.g. '{Product} costs {Price}'")
    _chunking_args(ingest)
    documents = kb_sub.add_parser("documents", help="list the documents of a knowledge base")
    documents.add_argument("--kb", default="main")
    documents.add_argument("--json", action="store_true")
    forget = kb_sub.add_parser("forget", help="delete a document and its chunk topics")
    forget.add_argument("document_id")
    crawl = kb_sub.add_parser("crawl", help="crawl a website into a knowledge base (same host, robots.txt honoured)")
    crawl.add_argument("url")
    crawl.add_argument("--kb", default="main")
    crawl.add_argument("--depth", type=int, default=None, help="link hops from URL (SWITCHBOARD_CRAWL_MAX_DEPTH)")
    crawl.add_argument("--max-pages", type=int, default=None, help="pages to keep (SWITCHBOARD_CRAWL_MAX_PAGES)")
    reingest = kb_sub.add_parser("reingest", help="ingest a document again from its kept original")
    reingest.add_argument("document_id")
    _chunking_args(reingest)


def files_to_ingest(path: Path, recursive: bool, ext: str | None) -> list[tuple[Path, str]]:
    """(file, document name) pairs: a directory's files are named by their path under it."""
    from rag_core.extract import FORMATS

    if path.is_file():
        return [(path, path.name)]
    if not path.is_dir():
        raise SystemExit(f"no such file or directory: {path}")
    wanted = {e if e.startswith(".") else f".{e}" for e in (ext or "").lower().split(",") if e.strip()}
    known = {e for exts in FORMATS.values() for e in exts}
    pattern = "**/*" if recursive else "*"
    return [
        (file, file.relative_to(path).as_posix())
        for file in sorted(path.glob(pattern))
        if file.is_file() and file.suffix.lower() in (wanted or known)
    ]


def _print_outcome(outcome: dict[str, Any]) -> None:
    doc = outcome["document"]
    if doc["status"] == "failed":
        print(f"  FAILED {doc['name']}: {doc['error']}")
    elif outcome["unchanged"]:
        print(f"  unchanged {doc['name']}")
    else:
        print(
            f"  {doc['name']}: {doc['chunk_count']} chunks ({outcome['embedded']} embedded, "
            f"{outcome['deleted']} removed) [{doc['id']}]"
        )


def _ingest(args: argparse.Namespace, call: Callable[..., Any]) -> int:
    files = files_to_ingest(args.path, args.recursive, args.ext)
    if not files:
        raise SystemExit(f"no files to ingest under {args.path} (check --ext and --recursive)")
    failed = 0
    outcomes = []
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, transient=True) as progress:
        task = progress.add_task(f"ingesting into {args.kb}", total=len(files))
        for file, name in files:
            progress.update(task, description=f"{name[:40]:<40}")
            outcome = call("ingest", args.kb, name, file.read_bytes(), _chunking(args), args.row_template)
            outcomes.append(outcome)
            failed += outcome["document"]["status"] == "failed"
            progress.advance(task)
    for outcome in outcomes:
        _print_outcome(outcome)
    print(f"{len(files)} file(s): {len(files) - failed} ingested, {failed} failed")
    return 1 if failed else 0


def run(args: argparse.Namespace, settings: Settings, remote: Any | None) -> int:
    if args.kb_command == "crawl":
        from gateway.cli.kb_crawl import crawl

        return crawl(args, settings, remote)
    if remote:
        return _run(args, _remote_call(remote))
    call, close = _local_call(settings)
    try:
        return _run(args, call)
    finally:
        close()


def _run(args: argparse.Namespace, call: Callable[..., Any]) -> int:
    command = args.kb_command
    if command == "ingest":
        return _ingest(args, call)
    if command == "bases":
        for base in call("bases"):
            print(f"{base['name']}\t{base['topics']} topics\t{base['documents']} documents\t{base['description']}")
        return 0
    if command == "create":
        base = call("create", args.name, args.description, _chunking(args))
        print(f"created {base['name']} (collection {base['collection']})")
        return 0
    if command == "describe":
        print(json.dumps(call("describe", args.kb), indent=2))
        return 0
    if command == "drop":
        call("drop", args.name)
        print(f"deleted knowledge base {args.name}")
        return 0
    if command == "documents":
        records = call("documents", args.kb)
        if args.json:
            print(json.dumps(records, indent=2))
        for r in [] if args.json else records:
            error = f"\t{r['error']}" if r["error"] else ""
            print(f"{r['id']}\t{r['status']}\t{r['chunk_count']} chunks\t{r['name']}{error}")
        return 0
    if command == "forget":
        print(f"deleted document {args.document_id} ({call('forget', args.document_id)} topics)")
        return 0
    if command == "reingest":
        outcome = call("reingest", args.document_id, _chunking(args))
        _print_outcome(outcome)
        return 1 if outcome["document"]["status"] == "failed" else 0
    raise SystemExit(f"unknown kb command {command!r}")


def _remote_call(remote: Any) -> Callable[..., Any]:
    def call(op: str, *a: Any) -> Any:
        if op == "ingest":
            kb, name, data, chunking, row_template = a
            params = {"kb": kb, **({"row_template": row_template} if row_template else {})}
            params.update({("chunking" if k == "strategy" else k): v for k, v in (chunking or {}).items()})
            body = remote.call(
                "POST", "/api/kb/documents", params=params, files={"file": (name, data)}, allow_status=(422,)
            )
            return body["documents"][0]
        if op == "bases":
            return remote.call("GET", "/api/kb/bases")["bases"]
        if op == "create":
            name, description, chunking = a
            return remote.call("POST", "/api/kb/bases", json={
                "name": name, "description": description, **({"chunking": chunking} if chunking else {})
            })
        if op == "describe":
            return remote.call("GET", f"/api/kb/bases/{a[0]}")
        if op == "drop":
            return remote.call("DELETE", f"/api/kb/bases/{a[0]}")
        if op == "documents":
            return remote.call("GET", "/api/kb/documents", params={"kb": a[0]})["documents"]
        if op == "forget":
            return remote.call("DELETE", f"/api/kb/documents/{a[0]}")["deleted_topics"]
        if op == "reingest":
            doc_id, chunking = a
            params = {("chunking" if k == "strategy" else k): v for k, v in (chunking or {}).items()}
            return remote.call("POST", f"/api/kb/documents/{doc_id}/reingest", params=params, allow_status=(422,))
        raise ValueError(op)

    return call


def _local_call(settings: Settings) -> tuple[Callable[..., Any], Callable[[], None]]:
    from gateway.core.errors import GatewayError
    from gateway.knowledge.search import Knowledge

    knowledge = Knowledge(settings, None)
    loop = asyncio.new_event_loop()

    async def dispatch(op: str, *a: Any) -> Any:
        bases, documents = knowledge.bases, knowledge.documents
        if op == "ingest":
            kb, name, data, chunking, row_template = a
            outcome = await documents.ingest(
                kb, name, data, chunking=chunking, row_template=row_template, origin="path"
            )
            return outcome.model_dump(mode="json")
        if op == "bases":
            return [(await bases.describe(i.name)).model_dump(mode="json") for i in await bases.catalog.all()]
        if op == "create":
            name, description, chunking = a
            await bases.create(name, description, chunking)
            return (await bases.describe(name)).model_dump(mode="json")
        if op == "describe":
            return (await bases.describe(a[0])).model_dump(mode="json")
        if op == "drop":
            return await bases.delete(a[0])
        if op == "documents":
            return [r.model_dump(mode="json") for r in await documents.list(a[0])]
        if op == "forget":
            return await documents.delete(a[0])
        if op == "reingest":
            return (await documents.reingest(a[0], chunking=a[1])).model_dump(mode="json")
        raise ValueError(op)

    def call(op: str, *a: Any) -> Any:
        try:
            return loop.run_until_complete(dispatch(op, *a))
        except GatewayError as exc:
            raise SystemExit(f"error: {exc}") from None

    def close() -> None:
        knowledge.close()  # local mode holds the data dir's lock until closed
        loop.close()

    return call, close
