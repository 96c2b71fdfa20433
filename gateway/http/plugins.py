"""Packages above the gateway (``channels``, ``admin_ui``) plug in through entry points.

Imports point one way (``channels → gateway → rag_core``; nothing imports ``admin_ui``), so the
gateway never imports them: each declares an ``install(app, context)`` function in the
``switchboard.plugins`` entry-point group of ``pyproject.toml``; ``context`` is the narrow
``ChannelContext`` (``gateway.channel``), not all of ``Services``. A package whose work also runs
in ``switchboard worker`` (the channels consume the inbox there) declares an
``install_worker(context)`` in ``switchboard.workers``.
"""

from __future__ import annotations

import logging
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import FastAPI

    from gateway.services import Services

log = logging.getLogger(__name__)
GROUP = "switchboard.plugins"
WORKER_GROUP = "switchboard.workers"


def _install(group: str, *args: object) -> list[str]:
    installed = []
    for ep in sorted(entry_points(group=group), key=lambda e: e.name):
        ep.load()(*args)
        installed.append(ep.name)
    log.debug("%s installed: %s", group, installed)
    return installed


def install_plugins(app: FastAPI, services: Services) -> list[str]:
    return _install(GROUP, app, services.channel_context(holds_listeners=True))


def install_worker_plugins(services: Services) -> list[str]:
    return _install(WORKER_GROUP, services.channel_context())
