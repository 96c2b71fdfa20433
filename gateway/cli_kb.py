"""``switchboard kb ...`` and ``switchboard eval retrieval ...``."""

from __future__ import annotations

import argparse


def register_kb(sub: argparse._SubParsersAction) -> None:
    sub.add_parser("kb", help="manage the knowledge base (import, list, search, delete)")


def register_eval(sub: argparse._SubParsersAction) -> None:
    sub.add_parser("eval", help="evaluate retrieval on a labelled query set")
