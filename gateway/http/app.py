"""The FastAPI app factory."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from gateway.core.settings import Settings
from gateway.http import agents as agent_api
from gateway.http import api_keys as api_keys_api
from gateway.http import connections as connections_api
from gateway.http import openai_compat
from gateway.http import tool_sources as tool_sources_api
from gateway.http.body_limit import BodyLimit
from gateway.http.conversations import router as conversations_router
from gateway.http.disconnect import CancelOnDisconnect
from gateway.http.documents import CONSOLE_UPLOAD_PATH, PREVIEW_PATH, UPLOAD_PATH, upload_body_limit
from gateway.http.documents import router as documents_router
from gateway.http.errors import install_error_handlers
from gateway.http.feedback import router as feedback_router
from gateway.http.health import router as health_router
from gateway.http.insights import export_router
from gateway.http.insights import router as insights_router
from gateway.http.kb_jobs import router as kb_jobs_router
from gateway.http.knowledge import IMPORT_PATH
from gateway.http.knowledge import router as knowledge_router
from gateway.http.knowledge_bases import router as knowledge_bases_router
from gateway.http.live_routes import include_live_routes
from gateway.http.mcp_server import McpEndpoint
from gateway.http.openapi import install_openapi
from gateway.http.plugins import install_plugins
from gateway.http.responses import ADMIN, CALLER
from gateway.http.security_headers import SecurityHeaders
from gateway.http.webhooks import router as webhooks_router
from gateway.services import Services

log = logging.getLogger(__name__)
GC_THRESHOLDS = (20_000, 20, 20)  # CPython's are (700, 10, 10); measured with bench/webhook_ack.py (README)


def create_app(settings: Settings | None = None, *, services: Services | None = None) -> FastAPI:
    settings = settings or Settings.load()
    services = services or Services.build(settings)
    mcp = McpEndpoint()  # tools (issue 40): the agent served over MCP at /mcp

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        services.register_jobs(asyncio.get_running_loop())
        await services.start()
        thresholds = gc.get_threshold()
        if settings.gc_tuning:
            # Everything built so far (imported SDKs, models, clients) lives as long as the process: move it
            # out of the collector's reach, or a full collection walks it all and stalls every request.
            gc.collect()
            gc.freeze()
            # CPython collects the young generations every 700 new containers: under a burst that is many times
            # a second, 2-4 ms each on the loop (timed with gc.callbacks). Collect far less often while serving.
            gc.set_threshold(*GC_THRESHOLDS)
        log.info("switchboard agent %r ready", settings.agent_id)
        try:
            async with mcp.running():
                yield
        finally:
            services.unregister_jobs()
            await services.aclose()
            if settings.gc_tuning:
                gc.unfreeze()  # an app embedded in a longer-lived process (tests, a host) leaves nothing pinned
                gc.set_threshold(*thresholds)

    docs = settings.api_docs  # SWITCHBOARD_API_DOCS=false: no /docs, /redoc or /openapi.json
    app = FastAPI(title="Switchboard", version="0.1.0", lifespan=lifespan, docs_url="/docs" if docs else None,
                  redoc_url="/redoc" if docs else None, openapi_url="/openapi.json" if docs else None)
    app.state.services = services
    install_error_handlers(app)
    # Outside every route (channels' vendor webhooks and the web chat included): an oversized body
    # is refused before it is read, whoever sends it and whatever the route would do with it.
    app.add_middleware(CancelOnDisconnect, paths=(UPLOAD_PATH, PREVIEW_PATH))  # extraction stops with the client
    app.add_middleware(
        BodyLimit, max_bytes=settings.max_body_bytes, per_path={
            IMPORT_PATH: settings.max_import_bytes,
            # a multipart upload carries some framing besides the files; each file is checked exactly
            **{path: upload_body_limit(settings.max_upload_mb)
               for path in (UPLOAD_PATH, PREVIEW_PATH, CONSOLE_UPLOAD_PATH)},
        }
    )
    app.include_router(health_router)
    for admin_router in (export_router, knowledge_router, knowledge_bases_router, documents_router, kb_jobs_router,
                         conversations_router, agent_api.admin, api_keys_api.router, connections_api.router,
                         insights_router, tool_sources_api.router, webhooks_router):
        app.include_router(admin_router, responses=ADMIN)
    app.include_router(feedback_router, responses=ADMIN)  # a visitor's session or the admin token
    app.include_router(agent_api.callers, responses=CALLER)
    app.include_router(openai_compat.router, responses=CALLER)
    app.router.routes.append(mcp.route())
    include_live_routes(app)
    install_plugins(app, services)
    install_openapi(app)
    app.add_middleware(SecurityHeaders)  # added last: outermost, so every response passes it
    return app
