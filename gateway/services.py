"""The composition root: every service built once from ``Settings`` and passed down by constructor."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import redis as redis_sync
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.driver_info import DriverInfo
from redis.exceptions import ConnectionError as RedisConnectionError
from rq import Queue

from gateway.agents.agent_tools import AgentTools
from gateway.agents.api_keys import ApiKeys
from gateway.agents.caller import CallerReader
from gateway.agents.channel_agent import AgentCallOptions, AgentInstructions, ChannelAgent
from gateway.agents.invoker import CAPABILITIES as API_CAPABILITIES
from gateway.agents.invoker import CHANNEL as API_CHANNEL
from gateway.agents.invoker import AgentInvoker
from gateway.agents.settings_agent import sync_channel_agent
from gateway.agents.store import AgentStore
from gateway.catalogue import CUSTOMER_ATTRIBUTES, PERSONA_ATTRIBUTES
from gateway.connections.key_file import secret_keys
from gateway.connections.model import Connection, environment_connections
from gateway.connections.secrets import CredentialBox
from gateway.connections.service import Connections
from gateway.connections.store import ConnectionStore
from gateway.connections.verify import ConnectionVerifier
from gateway.conversation.attributes import CustomerAttributes, PersonaAttributes
from gateway.conversation.console_sessions import ConsoleSessions
from gateway.conversation.handoff import Handoffs
from gateway.conversation.listing import ConversationList
from gateway.conversation.live_feed import LiveFeed
from gateway.conversation.memory import Memory
from gateway.conversation.operators import Operators
from gateway.conversation.rate_limit import RateLimits
from gateway.conversation.sessions import Sessions
from gateway.conversation.signin_guard import SignInGuard
from gateway.conversation.store import RedisStore
from gateway.conversation.turn_lock import TurnLock
from gateway.core.blas import limit_blas_threads
from gateway.core.client_address import ClientAddresses
from gateway.core.clock import Clock
from gateway.core.command import cli_command
from gateway.core.errors import GatewayError
from gateway.core.events import AttributeChanged, ConversationEnded, ConversationStarted, EventBus, TurnCompleted
from gateway.core.metrics import Metrics
from gateway.core.outbound import OutboundPolicy, Resolver, system_resolver
from gateway.core.outbound_client import FetchLimits, GuardedClient
from gateway.core.redis_packing import hiredis_packing
from gateway.core.redis_tally import tallying
from gateway.core.settings import Settings
from gateway.inbox.consumer import InboxConsumer
from gateway.inbox.handler import InboxHandler
from gateway.inbox.operator_desk import DirectSink, OperatorDesk
from gateway.inbox.retries import RetryWindow
from gateway.inbox.stream import Inbox
from gateway.insight.feedback import Feedback
from gateway.insight.service import Insight, VisitorCheck
from gateway.insight.webhook_delivery import WebhookDelivery
from gateway.jobs import registry as jobs
from gateway.jobs.embedded import EmbeddedRedis
from gateway.jobs.mutex import RedisMutex
from gateway.jobs.registry import JobHandler
from gateway.jobs.worker import QUEUES, InProcessWorker
from gateway.knowledge.agentic import AgenticResponder
from gateway.knowledge.appends import APPEND_TEXT_JOB, CRAWL_JOB, KnowledgeAppends, PageShaper
from gateway.knowledge.citing import CiteSources, document_urls, policy_of
from gateway.knowledge.crawler import Crawler, CrawlLimits
from gateway.knowledge.demo import load_demo_knowledge
from gateway.knowledge.ingest_jobs import IngestJobs
from gateway.knowledge.kb_tool import KnowledgeTool, ToolSupport
from gateway.knowledge.rag_preparation import PREPARE_RAG_JOB, PrepareRagContext
from gateway.knowledge.search import Knowledge, extract_budget
from gateway.knowledge.semantic_cache import SemanticCache
from gateway.knowledge.topic_writer import TopicWriter
from gateway.knowledge.websites import WebsiteIngestion
from gateway.live.context import FETCH_DATA_JOB, LiveContext
from gateway.live.conversation_meta import EXTRACT_META_JOB
from gateway.live.prompt import PromptBuilder
from gateway.live.template_render import RenderBudget
from gateway.live.timers import TIMER_TICK_JOB, Timer, periodic_timer
from gateway.media.conversation_documents import ConversationDocuments
from gateway.media.documents import ChatDocuments
from gateway.media.download import MediaDownloader
from gateway.media.service import ChatMedia
from gateway.media.speech import Speech
from gateway.tools.mcp_client import McpClient
from gateway.tools.service import ToolSources
from gateway.tools.store import ToolSourceStore
from gateway.turn.llm import LLMClient
from gateway.turn.pipeline import TurnPipeline
from gateway.turn.ports import Capabilities, RagMode, TranscriptSink
from gateway.turn.responders import LLMResponder, OfflineResponder, Responder
from gateway.turn.runner import TurnRunner
from gateway.turn.tools import ToolJournal, ToolLoop

log = logging.getLogger(__name__)

Hook = Callable[[], Awaitable[None]]
REDIS_WARM_CONNECTIONS = 32
INTERRUPTED_AFTER_S = 900.0  # a document lock's lease: past it, a silent ingest's holder is taken for gone
IDLE_SWEEP_TIMER = "end_idle"
HANDOFF_RETURN_TIMER = "handoff_return"
WEBSITE_REFRESH_TIMER = "website_refresh"
CSAT_TIMER = "csat"


@dataclass(frozen=True)
class ChannelContext:
    """What a channel adapter may use of the gateway — its whole view of it, not all of ``Services``.

    ``inbox_handlers`` is where a messaging adapter registers itself for the inbox's turn
    consumers (they look handlers up when each delivery arrives, so registration order does not
    matter); ``on_start``/``on_stop`` run with the app's lifespan."""

    settings: Settings
    store: RedisStore
    sessions: Sessions
    pipeline: TurnPipeline
    turns: TurnRunner
    inbox: Inbox
    metrics: Metrics
    inbox_handlers: dict[str, InboxHandler]
    rag_modes: dict[str, RagMode]  # channel name -> how its turns get knowledge-base context
    capabilities: dict[str, Capabilities]  # channel name -> what it can do (handoff among them)
    direct_sinks: dict[str, DirectSink]  # channels that show an operator's reply themselves (web chat)
    live: LiveFeed  # stored messages and handoff changes as they happen
    on_start: list[Hook]
    on_stop: list[Hook]
    rate_limits: RateLimits | None = None  # web chat's sessions and messages (README: Rate limits)
    visitors: list[VisitorCheck] = field(default_factory=list)  # who may rate a reply (insight, issue 41)
    feedback: Feedback | None = None  # ratings from the channels' buttons (insight, issue 41)
    # the customer left before a finished turn's reply reached them (a caller who hung up before it was
    # spoken): counts the conversation ``abandoned`` once (insight, issue 41); given the conversation id
    left_after_turn: Callable[[str], Awaitable[None]] | None = None
    # conn (issue 28): connections the webhooks route by, and each kind's vendor check (channels fill it)
    connections: ConnectionStore | None = None
    connection_verifiers: dict[str, ConnectionVerifier] = field(default_factory=dict)
    # the environment-configured channels by kind (the read-only connection ``default``): their vendor
    # errors are masked by these credentials as a connection's are by its own
    environment_connections: dict[str, Connection] = field(default_factory=dict)
    # whether this process holds connections' long-lived listeners (a mailbox, a Discord Gateway): a serving
    # process does, a ``switchboard worker`` does not (it only answers what the listeners queued)
    holds_listeners: bool = False
    media: ChatMedia | None = None  # issue 44: a chat's voice notes, photos and documents made into a turn

    async def ack_delivery(self, channel: str, dedup_id: str, order_key: str, body: str | bytes) -> bool:
        """Queue a verified delivery in the inbox (one round trip); False, counted, for a vendor's retry."""
        queued = await self.inbox.push(channel, dedup_id, order_key, body)
        if not queued:
            self.metrics.duplicates.labels(channel).inc()
        return queued


@dataclass
class Services:
    settings: Settings
    redis: Redis
    redis_sync: redis_sync.Redis
    store: RedisStore
    persona_attributes: PersonaAttributes
    customer_attributes: CustomerAttributes
    memory: Memory
    events: EventBus
    sessions: Sessions
    lock: TurnLock
    metrics: Metrics
    llm: LLMClient | None
    prompts: PromptBuilder
    responder: Responder
    pipeline: TurnPipeline
    queues: dict[str, Queue]
    knowledge: Knowledge | None = None
    rag: PrepareRagContext | None = None
    embedded_redis: EmbeddedRedis | None = None
    worker: InProcessWorker | None = None
    turns: TurnRunner | None = None  # background turns (voice, inbox deliveries, polled updates)
    inbox: Inbox | None = None  # deliveries the webhooks acknowledged, waiting for a turn consumer
    consumer: InboxConsumer | None = None  # started when this process consumes the inbox
    inbox_handlers: dict[str, InboxHandler] = field(default_factory=dict)  # channel name -> its handler
    live: LiveContext | None = None  # prompt templates, sections, feeds, data injection, calendar, timers
    ingest_jobs: IngestJobs | None = None  # progress of uploads, crawls and appends
    appends: KnowledgeAppends | None = None  # appended text and websites, crawls
    operators: Operators | None = None  # console accounts
    console_sessions: ConsoleSessions | None = None
    rate_limits: RateLimits | None = None  # every limited surface (README: Rate limits)
    client_addresses: ClientAddresses | None = None  # who a request comes from, for the rate limits
    signin: SignInGuard | None = None  # the console's sign-in limit, counted before the password check
    handoffs: Handoffs | None = None  # who answers each conversation: the bot or a person
    desk: OperatorDesk | None = None  # the operator's side of a handoff
    conversations: ConversationList | None = None  # the filtered conversation list
    agents: AgentStore | None = None  # agents and their versions (the agent API)
    api_keys: ApiKeys | None = None  # the agent API's callers
    callers: CallerReader | None = None  # a caller's key, agent, version and limit in one round trip
    invoker: AgentInvoker | None = None  # one invocation of an agent version, through the turn pipeline
    live_feed: LiveFeed | None = None  # stored messages and handoff changes as they happen
    direct_sinks: dict[str, DirectSink] = field(default_factory=dict)
    connections: Connections | None = None  # conn (issue 28): channel connections added at run time
    insight: Insight | None = None  # issue 41: feedback, outcomes, cost
    visitors: list[VisitorCheck] = field(default_factory=list)  # channels' visitors who may rate replies
    tool_sources: ToolSources | None = None  # tools (issue 40): MCP servers the agents' tools come from
    media: ChatMedia | None = None  # issue 44: voice notes, photos and documents sent in a chat
    on_start: list[Hook] = field(default_factory=list)
    on_stop: list[Hook] = field(default_factory=list)

    @classmethod
    def build(
        cls, settings: Settings, *, run_worker: bool | None = None, clock: Clock | None = None,
        resolver: Resolver = system_resolver,
        consume_inbox: bool | None = None,
    ) -> Services:
        embedded = None
        redis_url = settings.redis_url
        if redis_url is None:
            embedded = EmbeddedRedis(settings.data_dir / "redis")  # started with the services, not here
            redis_url = embedded.url
        # A blocking pool waits for a free connection under bursts instead of failing the request; bounded
        # connect and read times make a Redis that is down (or drops packets) a quick, clear 503.
        redis = Redis(connection_pool=hiredis_packing(tallying(BlockingConnectionPool.from_url(
            redis_url, max_connections=128, timeout=settings.redis_pool_wait_s,
            socket_connect_timeout=settings.redis_connect_timeout_s, socket_timeout=settings.redis_socket_timeout_s,
            health_check_interval=30,
            # A pooled connection that Redis closed (it restarted) is replaced at once, not reported as an error;
            # a timeout is not retried, so a hung Redis costs one read timeout.
            retry=Retry(ExponentialBackoff(cap=0.2, base=0.02), 2, supported_errors=(RedisConnectionError,)),
            # Told once: left to itself redis-py looks its own version up in the installed packages' metadata
            # (a walk of sys.path, milliseconds on the loop) for every new connection, i.e. in every burst.
            driver_info=DriverInfo(lib_version=redis_sync.__version__),
        ))))  # tallying: each turn's trace counts its round trips; hiredis_packing: commands packed in C
        # RQ's workers block on this client for longer than any request would: only connecting is bounded.
        sync = redis_sync.Redis.from_url(redis_url, socket_connect_timeout=settings.redis_connect_timeout_s)
        store = RedisStore(redis, settings.agent_id)
        persona_attributes = PersonaAttributes(store, PERSONA_ATTRIBUTES)
        events = EventBus()
        metrics = Metrics()
        memory = Memory(store)
        sessions = Sessions(store, persona_attributes, events, settings.inactivity_timeout_s)
        lock = TurnLock(redis, store.prefix, lease_s=settings.turn_lock_lease_s, idle_ttl_s=settings.order_idle_ttl_s)
        llm = LLMClient(settings) if settings.llm_configured else None
        customer_attributes = CustomerAttributes(store, CUSTOMER_ATTRIBUTES, events)
        queues = {q: Queue(settings.queue_name(q), connection=sync) for q in QUEUES}
        mutex = RedisMutex(redis, store.prefix)
        cache = SemanticCache(redis, store.prefix, ttl_s=settings.semantic_cache_ttl_s,
                              max_entries=settings.semantic_cache_max_entries,
                              max_entry_bytes=settings.semantic_cache_max_entry_bytes)
        knowledge = Knowledge(settings, llm, document_lock=lambda doc_id: mutex.hold(f"document:{doc_id}"),
                              cache=cache, metrics=metrics)
        rag_modes: dict[str, RagMode] = {}  # filled by the channels as they are installed
        tool_support = ToolSupport(settings.llm_supports_tools and llm is not None)
        keys = secret_keys(settings, create=True)  # embedded mode: generated into the data dir once
        box = CredentialBox(keys.raw, keys.generated_file)
        tool_policy = OutboundPolicy.parse(settings.outbound_allow_hosts, resolver)
        mcp_client = McpClient(tool_policy)
        tool_sources = ToolSources(ToolSourceStore(store, box), mcp_client, tool_policy)
        agents = AgentStore(store, unknown_tools=tool_sources.unknown)
        channel_agent = ChannelAgent(agents, settings.agent_id, citations=policy_of(settings))
        rag = PrepareRagContext(settings, knowledge, persona_attributes, memory, queues["rag"], rag_modes,
                                tool_support, channel_agent.choice)
        citing = CiteSources(settings, channel_agent.citations, document_urls(lambda: knowledge.bases.documents))
        events.subscribe(ConversationStarted, rag.on_conversation_started)
        responder: Responder = (
            LLMResponder(llm)
            if llm
            else OfflineResponder(settings, topic_count=lambda: knowledge.kb.count(label="rag_context"))
        )
        if llm is not None:
            tool = KnowledgeTool(knowledge, [n.strip() for n in settings.retrieval_kbs.split(",") if n.strip()])
            responder = AgenticResponder(llm, responder, tool, tool_support, settings.agent_max_tool_calls)
        live = LiveContext.build(
            settings, store, persona_attributes, customer_attributes, memory, llm, queues, metrics, clock, resolver
        )
        prompts = PromptBuilder(
            live.templates, live.calendar, live.data_injection, live.feeds, live.clock,
            persona_attributes, customer_attributes, settings.prompt_budgets, RenderBudget.from_settings(settings),
        )
        handoffs = Handoffs(store)
        pipeline = TurnPipeline(
            settings, store, sessions, memory, lock, prompts, responder, events, metrics,
            preparers=[rag, citing, AgentInstructions(channel_agent),  # conn (issue 28): a connection's agent
                       AgentTools(channel_agent, tool_sources),  # tools (issue 40): the agent's tools
                       AgentCallOptions(channel_agent)],  # the agent's model and inference settings
            handoffs=handoffs,
        )
        pipeline.tool_loop = ToolLoop(settings, llm, ToolJournal(store), handoffs)
        pipeline.closing_writes.append(live.closing_writes)
        insight = Insight.build(settings, store, metrics, box, tool_policy)
        pipeline.turn_writes.append(insight.outcomes.turn_into)
        pipeline.turn_writes.append(insight.outcomes.abandoned_into)
        if insight.csat.enabled:
            pipeline.turn_writes.append(insight.csat.turn_into)
            pipeline.intercepts.append(insight.csat.take)
        events.subscribe(ConversationEnded, insight.outcomes.on_conversation_ended)
        events.subscribe(TurnCompleted, insight.outcomes.on_turn_completed)  # outcomes on /metrics
        services = cls(
            settings=settings,
            redis=redis,
            redis_sync=sync,
            store=store,
            persona_attributes=persona_attributes,
            customer_attributes=customer_attributes,
            memory=memory,
            events=events,
            sessions=sessions,
            lock=lock,
            metrics=metrics,
            llm=llm,
            prompts=prompts,
            responder=responder,
            pipeline=pipeline,
            queues=queues,
            embedded_redis=embedded,
            knowledge=knowledge,
            rag=rag,
        )
        services.readiness["qdrant"] = lambda: knowledge.kb.ping()
        services.ingest_jobs = IngestJobs(store)
        services.operators = Operators(store, concurrent_checks=settings.signin_concurrent_checks)
        services.console_sessions = ConsoleSessions(
            store, idle_s=settings.console_idle_s, absolute_s=settings.console_max_age_s
        )
        services.rate_limits = RateLimits.build(store, settings, metrics)
        services.client_addresses = ClientAddresses(settings.trusted_proxies)
        services.signin = SignInGuard(services.rate_limits.signin_account, services.rate_limits.signin_address,
                                      settings.signin_known_address_days * 86_400)
        services.on_start.append(services._first_admin)
        services.appends = _appends(settings, knowledge, customer_attributes, services.ingest_jobs, llm, queues, mutex,
                                    resolver, services.on_stop)
        events.subscribe(AttributeChanged, services.appends.on_attribute_changed)
        if settings.demo:
            services.on_start.append(lambda: load_demo_knowledge(knowledge, customer_attributes))
        services.turns = TurnRunner(pipeline, store, metrics, drain_timeout_s=settings.turn_drain_timeout_s)
        services.on_stop.append(mcp_client.aclose)  # (stop hooks run last first) after the turns stop
        services.on_stop.append(services.turns.stop)
        services.inbox = Inbox(redis, store, order_idle_ttl_s=settings.order_idle_ttl_s,
                               retry_window=RetryWindow.from_settings(settings))
        services.handoffs = handoffs
        services.desk = OperatorDesk(settings, store, handoffs, services.inbox, services.inbox_handlers,
                                     services.direct_sinks, pipeline.capabilities)
        services.insight = insight
        # model calls made in jobs, outside a turn's task (issue 41: cost): the voice retrieval job's, the live
        # data summary's and the conversation meta extraction's
        rag.record_usage = live.data_injection.record_usage = live.conversation_meta.record_usage = \
            insight.usage.record
        insight.insights.encoder = lambda: knowledge.dense  # gaps merged by meaning
        webhook_delivery = WebhookDelivery(settings, insight.webhooks, tool_policy, redis_url,
                                           {insight.price_edits.changes_channel: insight.price_edits.reload})
        services.on_start.append(webhook_delivery.start)
        services.on_stop.append(webhook_delivery.stop)
        services.on_stop.append(insight.outcomes.stop)  # a pending /metrics count of outcomes
        services.desk.on_take_over.append(insight.outcomes.handed_off)
        insight.csat.sink_for = services.desk.reply_sink
        services.live_feed = LiveFeed(store)
        services.conversations = ConversationList(store, handoffs)
        services.on_start.append(store.search.start_backfill)  # conversations stored before the search index
        services.on_stop.append(store.search.stop_backfill)
        services.agents = agents
        services.api_keys = ApiKeys(store, settings.api_key_rate_limit_per_min, services.rate_limits.api_keys)
        services.callers = CallerReader(services.api_keys, agents)
        services.invoker = AgentInvoker(settings, store, pipeline, knowledge, llm, tool_support)
        services.invoker.tools = tool_sources
        pipeline.capabilities[API_CHANNEL] = API_CAPABILITIES
        services.direct_sinks[API_CHANNEL] = lambda conversation: TranscriptSink(API_CHANNEL)
        services.on_start.append(services._channel_agent)
        services.connections = Connections(settings, ConnectionStore(store, box), agents, {})
        services.tool_sources = tool_sources
        services.media = _chat_media(settings, pipeline, llm, channel_agent, resolver, store)
        services.on_stop.append(services.media.aclose)
        services.on_start.append(services._rotate_connection_keys)
        if settings.tool_stdio_servers:
            services.on_start.append(services._declared_stdio_sources)
        services.on_stop.append(services.live_feed.stop)
        if consume_inbox if consume_inbox is not None else settings.inbox_consumer:
            services.consumer = InboxConsumer(
                services.inbox, services.turns, settings, metrics, handlers=services.inbox_handlers
            )
        services.live = live
        live.timers.add(_idle_sweep_timer(sessions, settings.session_sweep_s))
        live.timers.add(periodic_timer(HANDOFF_RETURN_TIMER, "handoff", min(60, settings.handoff_idle_s // 4 or 1),
                                       services.desk.return_idle))
        if insight.csat.enabled:
            live.timers.add(periodic_timer(CSAT_TIMER, "csat", insight.csat.sweep_period_s, insight.csat.sweep_fired))
        live.timers.add(periodic_timer(WEBSITE_REFRESH_TIMER, "webrefresh", 300, services.appends.refresh_if_due))
        live.subscribe(events)
        services.on_start.append(live.start)
        if run_worker if run_worker is not None else embedded is not None:
            services.worker = InProcessWorker(sync, settings)
        return services

    readiness: dict[str, Callable[[], Awaitable[None]]] = field(default_factory=dict)

    def job_handlers(self) -> dict[str, JobHandler]:
        """What each background job name runs in this process."""
        assert self.live is not None and self.rag is not None and self.appends is not None  # built in ``build``
        return {
            TIMER_TICK_JOB: self.live.timers.tick,
            FETCH_DATA_JOB: self.live.data_injection.fetch,
            EXTRACT_META_JOB: self.live.conversation_meta.extract,
            PREPARE_RAG_JOB: self.rag.prepare_job,
            APPEND_TEXT_JOB: self.appends.append_text,
            CRAWL_JOB: self.appends.crawl_sites,
        }

    def register_jobs(self, loop: asyncio.AbstractEventLoop) -> None:
        """Jobs of this agent taken by this process's workers run on ``loop``, with these services."""
        jobs.register(self.settings.agent_id, loop, self.job_handlers())

    def unregister_jobs(self) -> None:
        jobs.unregister(self.settings.agent_id)

    async def _channel_agent(self) -> None:
        """The gateway's own agent (id ``SWITCHBOARD_AGENT_ID``) is one of the agent API's agents, made from
        the settings and following them until an operator edits it (``gateway.agents.channel_agent``)."""
        if self.agents is None:
            return
        try:
            await sync_channel_agent(self.agents, self.settings)
        except Exception as exc:  # Redis down at start: /readyz says so
            log.warning("could not check the channels' agent: %s", exc)

    async def _rotate_connection_keys(self) -> None:
        """Connections' credentials (and tool sources' headers) sealed under an older ``SWITCHBOARD_SECRET_KEY``
        are re-sealed under the newest."""
        if self.connections is None or not self.connections.store.box.ready:
            return
        try:
            report = await self.connections.store.rotate_keys()
        except Exception as exc:  # Redis down at start: the next start does it
            log.warning("connections: could not re-encrypt under the newest key: %s: %s", type(exc).__name__, exc)
            return
        if report.resealed:
            log.info("connections: re-encrypted %d connection(s) under the newest secret key: %s",
                     len(report.resealed), ", ".join(report.resealed))
        for record in report.unreadable:
            log.error("connections: %s could not be re-encrypted: %s", record.connection_id, record.reason)
        if not report.older_keys_removable:
            log.error("connections: %s `switchboard connections check-keys` lists them.", report.summary())
        if self.tool_sources is not None:
            try:
                changed = await self.tool_sources.store.rotate_keys()
            except Exception as exc:  # a source no key opens: reported, the rest of the start goes on
                log.warning("tool sources: could not re-encrypt under the newest key: %s: %s", type(exc).__name__, exc)
                return
            if changed:
                log.info("tool sources: re-encrypted %d source(s)' headers under the newest secret key", changed)

    async def _declared_stdio_sources(self) -> None:
        """``SWITCHBOARD_TOOL_STDIO_SERVERS``: each local command a tool source, added or brought up to date."""
        if self.tool_sources is None:
            return
        try:
            for source in await self.tool_sources.declare_stdio(self.settings.tool_stdio_servers):
                if source.status.last_error:
                    log.warning("tool source %s (stdio): %s", source.name, source.status.last_error)
        except Exception as exc:  # Redis down at start, a name taken: the next start tries again
            log.warning("tool sources: could not add the declared stdio servers: %s: %s", type(exc).__name__, exc)

    async def _first_admin(self) -> None:
        """``SWITCHBOARD_ADMIN_PASSWORD`` makes the first console admin when there is no account yet."""
        password = self.settings.admin_password
        if self.operators is None:
            return
        try:
            if await self.operators.count() > 0:
                return
            if password is None:
                log.warning("console: no account yet. Create the first admin with `%s operators create NAME` (it "
                            "asks for a password), or start with SWITCHBOARD_ADMIN_PASSWORD set", cli_command())
                return
            await self.operators.create(self.settings.admin_user, password.get_secret_value(), "admin")
            log.info("console: created the first admin %r", self.settings.admin_user)
        except GatewayError as exc:  # a too-short password must not stop the gateway; say so
            log.error("console: could not create the first admin %r: %s", self.settings.admin_user, exc)
        except Exception as exc:  # Redis down at start: /readyz says so; the console waits for it
            log.warning("console: could not check for a first admin: %s", exc)

    def channel_context(self, *, holds_listeners: bool = False) -> ChannelContext:
        assert self.turns is not None and self.inbox is not None  # both built in ``build``
        return ChannelContext(
            settings=self.settings, store=self.store, sessions=self.sessions, pipeline=self.pipeline,
            turns=self.turns, inbox=self.inbox, metrics=self.metrics, inbox_handlers=self.inbox_handlers,
            rag_modes=self.rag.rag_modes, capabilities=self.pipeline.capabilities, direct_sinks=self.direct_sinks,
            live=self.live_feed, on_start=self.on_start, on_stop=self.on_stop, rate_limits=self.rate_limits,
            connections=self.connections.store if self.connections else None,
            connection_verifiers=self.connections.verifiers if self.connections else {},
            visitors=self.visitors, environment_connections=environment_connections(self.settings),
            feedback=self.insight.feedback if self.insight else None, media=self.media,
            left_after_turn=self.insight.outcomes.left_after_turn if self.insight else None,
            holds_listeners=holds_listeners,
        )

    async def start(self) -> None:
        """Open what the services hold: the embedded Redis (when no URL is set), the knowledge base
        (the local-mode Qdrant lock, the embedding model), Redis connections, workers, timers."""
        limit_blas_threads()
        if self.embedded_redis is not None:
            await asyncio.to_thread(self.embedded_redis.start)
        if self.knowledge is not None:
            await asyncio.to_thread(self.knowledge.open)
        await self._open_redis_connections(REDIS_WARM_CONNECTIONS)
        await self._fail_interrupted()  # before this process's worker takes a job
        if self.worker is not None:
            self.worker.start()
        for hook in self.on_start:
            await hook()
        if self.consumer is not None and self.inbox_handlers:
            await self.consumer.start()

    async def _fail_interrupted(self) -> None:
        """Ingestion a stopped process left half done fails with a reason instead of staying
        ``processing`` / ``running`` forever. Alone on its local-mode Qdrant (embedded Redis), this
        process knows every such record is its own leftover; otherwise only records without progress
        for longer than a document lock's lease count."""
        stale_before = datetime.now(UTC) - timedelta(seconds=INTERRUPTED_AFTER_S)
        try:
            documents = [] if self.knowledge is None else await self.knowledge.documents.fail_interrupted(
                None if self.settings.qdrant_url is None else stale_before)
            jobs = [] if self.ingest_jobs is None else await self.ingest_jobs.fail_interrupted(
                None if self.settings.embedded else stale_before)
        except Exception:  # starting must not fail on it; the next start tries again
            log.exception("could not mark interrupted ingestion as failed")
            return
        if documents or jobs:
            log.warning("marked %d document(s) and %d ingestion job(s) left by a stopped process as failed",
                        len(documents), len(jobs))

    async def _open_redis_connections(self, count: int) -> None:
        """Open pool connections now: a burst of webhooks would otherwise wait on dozens of connects."""
        try:
            await asyncio.gather(*(self.redis.ping() for _ in range(count)))
        except Exception as exc:  # /readyz reports Redis; starting must not fail on it
            log.warning("could not open Redis connections at start: %s", exc)

    async def aclose(self) -> None:
        if self.consumer is not None:  # first: its turns still need the channels' vendor clients
            await self.consumer.stop()
        for hook in reversed(self.on_stop):
            try:
                await hook()
            except Exception:
                log.exception("stop hook failed")
        if self.worker is not None:
            self.worker.stop()
        if self.knowledge is not None:
            self.knowledge.close()
        if self.llm is not None:
            await self.llm.aclose()
        await self.redis.aclose()
        self.redis_sync.close()
        if self.embedded_redis is not None:
            self.embedded_redis.stop()


def _appends(
    settings: Settings, knowledge: Knowledge, attributes: CustomerAttributes, jobs: IngestJobs, llm: LLMClient | None,
    queues: dict[str, Queue], mutex: RedisMutex, resolver: Resolver, on_stop: list[Hook],
) -> KnowledgeAppends:
    """Appended text and websites: one guarded outbound client for every crawl of this process."""
    policy = OutboundPolicy.parse(settings.outbound_allow_hosts, resolver)
    limits = FetchLimits(
        timeout_s=settings.outbound_timeout_s, max_bytes=int(settings.crawl_max_page_mb * 1024 * 1024),
        max_ratio=settings.outbound_max_compression_ratio,
        retries=settings.outbound_retries,
    )
    clients: list[GuardedClient] = []  # made on the first crawl: an HTTP client's TLS setup costs ~40 ms

    def crawler(crawl_limits: CrawlLimits) -> Crawler:
        if not clients:
            clients.append(GuardedClient(policy, limits))
        return Crawler(clients[0], crawl_limits)

    async def close() -> None:
        for client in clients:
            await client.aclose()

    on_stop.append(close)
    writer = TopicWriter(llm)
    crawl_limits = CrawlLimits(
        max_depth=settings.crawl_max_depth, max_pages=settings.crawl_max_pages, per_host_delay_s=settings.crawl_delay_s
    )
    websites = WebsiteIngestion(
        knowledge, crawler, crawl_limits,
        shaper=lambda instructions: PageShaper(writer, knowledge, mutex, instructions) if llm else None,
    )
    return KnowledgeAppends(
        settings.agent_id, knowledge, attributes, jobs, writer, websites, queues["jobs"], mutex,
        settings.max_topic_chars,
    )


def _chat_media(settings: Settings, pipeline: TurnPipeline, llm: LLMClient | None, agent: ChannelAgent,
                resolver: Resolver, store: RedisStore) -> ChatMedia:
    """Media in chats (issue 44): downloads through the outbound guard, speech to text, the extractors' sandbox;
    a conversation's documents given to its later turns too."""
    downloader = MediaDownloader(settings, OutboundPolicy.parse(settings.outbound_allow_hosts, resolver))
    documents = ChatDocuments(extract_budget(settings), settings.chat_document_max_tokens)
    kept = ConversationDocuments(store, settings.inactivity_timeout_s)
    pipeline.preparers.append(kept)
    return ChatMedia(settings, pipeline, downloader, Speech(settings), documents, agent.vision, agent.model,
                     llm, kept)


def _idle_sweep_timer(sessions: Sessions, period_s: int) -> Timer:
    """A timer that ends idle conversations every ``period_s`` even when no message arrives."""

    async def sweep() -> None:
        ended = await sessions.end_idle()
        if ended:
            log.info("ended %d idle conversation(s)", ended)

    return periodic_timer(IDLE_SWEEP_TIMER, "idle", period_s, sweep)
