"""Settings are read once from the environment (prefix ``SWITCHBOARD_``) and an optional ``.env``.

Nothing else in the code base reads ``os.environ``: a ``Settings`` instance is built at the top
(CLI, app factory, worker) and passed down by constructor.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from gateway.core.models import CitationFormat
from rag_core.controls import CONTROL_FIELDS, RetrievalControls

OPENAI_DEFAULT_BASE = "https://api.openai.com/v1"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="SWITCHBOARD_", env_file=".env", env_file_encoding="utf-8", extra="ignore",
        populate_by_name=True, env_ignore_empty=True,
    )

    agent_id: str = Field(default="default", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    data_dir: Path = Path("./data")
    redis_url: str | None = None
    qdrant_url: str | None = None
    public_url: str = "http://127.0.0.1:8000"
    log_level: str = "INFO"
    log_json: bool = False
    demo: bool = False  # load the demo knowledge base when the knowledge base is empty

    # Language model (any OpenAI-compatible server).
    llm_base_url: str = OPENAI_DEFAULT_BASE
    llm_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("SWITCHBOARD_LLM_API_KEY", "OPENAI_API_KEY")
    )
    llm_model: str = "gpt-4o-mini"
    search_llm_model: str | None = None
    llm_timeout_s: float = 30.0
    llm_max_retries: int = 2
    llm_temperature: float = 0.7
    structured_temperature: float = 0.2
    structured_top_p: float = 0.0
    structured_max_tokens: int = 4000
    llm_fallback_message: str = (
        "Sorry, I can't answer right now. Please try again in a moment."
    )
    offline_message: str = (
        "No language model is configured for this gateway yet, so I can only answer from the "
        "knowledge base. Set SWITCHBOARD_LLM_API_KEY (or SWITCHBOARD_LLM_BASE_URL) to enable full replies."
    )
    offline_unknown_message: str = "I don't know the answer to that yet."
    offline_min_score: float = 0.5  # share of the question's words the best topic must contain

    # Embeddings and retrieval.
    embeddings: Literal["fastembed", "openai", "none"] = "fastembed"
    embedding_model: str = "sentence-transformers/all-MiniLM-L6-v2"
    embedding_model_path: Path | None = None
    retrieval_strategy: str | None = None
    rag_voice_wait_ms: int = 800
    rag_top_k: int = 3
    # Retrieval controls (rag_core.controls; each also a field of POST /api/kb/search and of an agent definition)
    relevance_threshold: float | None = None  # drop results whose calibrated score (0-1) is below this
    selection_strategy: str = "top_k"  # top_k | mmr
    mmr_lambda: float = 0.7
    max_results: int | None = None
    max_context_tokens: int | None = None  # cap on the injected knowledge text, cut at topic boundaries
    recency_boost: float = 0.0  # up to +this for a just-updated topic, halving every recency_half_life_days
    recency_half_life_days: float = 180.0
    reranker: str = "none"  # none | fastembed | http
    rerank_top_n: int = 20
    final_top_k: int | None = None
    semantic_cache: bool = True
    similarity_threshold: float = 0.95
    multi_query: bool = False
    query_reformulation: bool = False
    crag_confidence_threshold: float | None = None
    adaptive_routing: bool = False
    adjacent_chunk_range: int = 0
    adjacent_chunk_merge: bool = False
    reranker_model: str = "Xenova/ms-marco-MiniLM-L-6-v2"  # fastembed cross-encoder, by name
    reranker_model_path: Path | None = None  # ... or a local folder holding it
    reranker_base_url: str | None = None  # http: POST {base}/rerank (Cohere, Jina, TEI, vLLM, Infinity)
    reranker_api_key: SecretStr | None = None
    reranker_timeout_s: float = Field(default=5.0, gt=0)
    query_embedding_cache: int = Field(default=4096, ge=0)  # query vectors remembered per process (0: off)
    # int8: queries through an int8 copy of the model (measured: 4.3 instead of 6.8 ms a query, hit@1 unchanged)
    embedding_quantize: Literal["int8", "none"] = "int8"
    model_cache_dir: Path | None = None  # where the int8 copy is kept (None: <data dir>/models)
    embedding_threads: int | None = Field(default=None, ge=1, le=64)  # onnxruntime threads (None: its default)
    query_embedding_threads: int | None = Field(default=1, ge=1, le=64)  # ... for queries (None: the same)
    query_batching: bool = True  # concurrent turns' queries embedded in one call
    semantic_cache_ttl_s: int = Field(default=3600, ge=1)
    semantic_cache_max_entries: int = Field(default=10_000, ge=1)

    # Conversations.
    inactivity_timeout_s: int = 30 * 60
    session_sweep_s: int = Field(default=60, ge=1)  # how often idle conversations are ended
    max_message_chars: int = 4000
    memory_count: int = 15
    memory_max_chars: int = 10_000
    # Redis: bounded waits, so a Redis that is down answers 503 quickly instead of hanging requests.
    redis_connect_timeout_s: float = Field(default=2.0, gt=0)
    redis_socket_timeout_s: float = Field(default=5.0, gt=1)  # above the inbox's 1 s blocking reads
    redis_pool_wait_s: float = Field(default=20.0, gt=0)  # a burst waits this long for a free connection
    turn_lock_ttl_s: int = 120  # how long a turn waits for the conversation's earlier turns
    turn_lock_lease_s: float = Field(default=10.0, gt=0)  # a running turn's lease, renewed while it runs
    turn_deadline_s: float = Field(default=60.0, gt=0)  # context may use half; past it the fallback answers

    # Known gaps closed (issue 15 item 4): ordering keys, replies sent once, fenced consumers.
    order_idle_ttl_s: float = Field(default=24 * 3600, gt=0)  # a chat's order counters expire once idle this long

    # Admin and operators.
    admin_token: SecretStr | None = None
    admin_password: SecretStr | None = None  # with admin_user: the console's first admin, made on start if none exists
    admin_user: str = "admin"
    console_idle_s: int = Field(default=1800, ge=60)  # a console session ends after this long without a request
    console_max_age_s: int = Field(default=12 * 3600, ge=300)  # ... and this long after sign-in, whatever happens
    signin_failures_per_account: int = Field(default=5, ge=0)  # failed sign-ins per username per window
    signin_failures_per_address: int = Field(default=20, ge=0)  # failed sign-ins per client address per window
    signin_window_s: int = Field(default=900, ge=1)
    # Handoff: an operator takes a conversation over from the console; the bot is silent meanwhile.
    handoff_idle_s: int = Field(default=900, ge=30)  # no operator activity this long: the bot answers again
    # A user message containing one of these (case-insensitive, "|"-separated) asks for a person.
    handoff_phrases: str = (
        "talk to a human|speak to a human|talk to a person|speak to a person|real person|human agent|"
        "talk to someone|speak to someone|talk to an operator|speak to an operator|customer service representative"
    )
    handoff_llm_signal: bool = True  # the model may end its reply with [HANDOFF] to ask for a person
    handoff_message: str = "I'm passing you to a colleague. Someone will reply here as soon as possible."
    handoff_return_note: str = "No operator has replied for a while, so the assistant is answering again."

    # Channels.
    telegram_bot_token: SecretStr | None = None
    telegram_webhook_secret: SecretStr | None = None
    telegram_api_base: str = "https://api.telegram.org"
    telegram_mode: Literal["webhook", "polling"] = "webhook"
    slack_bot_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    slack_api_base: str = "https://slack.com/api/"
    twilio_account_sid: str | None = None
    twilio_auth_token: SecretStr | None = None
    twilio_api_base: str = "https://api.twilio.com"
    twilio_from_number: str | None = None

    # Channels (extra)
    channel_send_tries: int = Field(default=4, ge=1, le=10)  # outbound send attempts per message part
    channel_retry_base_s: float = 0.5  # first backoff after a 5xx / network error, doubled per try
    channel_retry_max_s: float = 30.0  # longest wait, also the cap on a vendor's retry_after
    turn_drain_timeout_s: float = 20.0  # on shutdown, how long in-flight turns may finish
    # Inbox: webhooks queue deliveries; turn consumers (in the gateway and/or `switchboard worker`) run them
    inbox_consumer: bool = True  # run turn consumers in the gateway process too (false: workers only)
    inbox_concurrency: int = Field(default=64, ge=1)  # turns one process runs at once
    inbox_reclaim_s: float = Field(default=30.0, gt=0)  # a dead consumer's deliveries are resumed after this
    # Inbox retries (vendor outages): a delivery that fails for a reason that may pass waits and is tried
    # again, with exponential backoff (jittered, capped), until the window since its first failure is over
    inbox_retry_window_s: float = Field(default=1800.0, gt=0)  # then it is dead-lettered with its reason
    inbox_retry_first_s: float = Field(default=2.0, gt=0)  # the first wait, doubled per failure
    inbox_retry_max_s: float = Field(default=300.0, gt=0)  # the longest wait between two tries
    telegram_register_webhook: bool = False  # call setWebhook(PUBLIC_URL/channels/telegram/webhook) on start
    channel_welcome_message: str = "Hi! Ask me anything and I'll do my best to help."
    channel_unsupported_message: str = (
        "I can only read text for now. Please type your question (a caption on a photo works too)."
    )
    sms_help_message: str = "Text your question and we'll reply. Reply STOP to opt out, START to opt back in."
    sms_resubscribed_message: str = "You're subscribed again. Text your question any time."
    voice_language: str = "en-US"
    voice_greeting: str = "Hello! How can I help you today?"
    voice_filler: str = "One moment please."
    voice_reprompt: str = "Sorry, I didn't catch that. How can I help?"
    voice_goodbye: str = "I haven't heard anything, so I'll hang up now. Goodbye!"
    voice_unavailable: str = "Sorry, I can't answer that right now. Is there anything else?"
    voice_reply_deadline_s: float = 5.0  # one webhook waits this long for the reply, then filler + Redirect
    voice_max_waits: int = 4  # fillers before giving up on a reply (each is one deadline)

    # Inbound feeds and outbound fetches.
    feeds_secret: SecretStr | None = None
    outbound_allow_hosts: str = ""

    # Prompt and live context
    feed_secrets: dict[str, SecretStr] = Field(default_factory=dict)  # per-feed, JSON {"feed": "secret"}
    feeds_max_bytes: int = 256 * 1024
    feeds_replay_window_s: int = 300
    prompt_budgets: dict[str, int] = Field(default_factory=dict)  # section -> max tokens, JSON
    data_injection_timeout_s: float = 15.0
    data_injection_max_bytes: int = 1_000_000
    data_injection_max_tokens: int = 1500
    data_injection_retry_intervals: list[int] = Field(default_factory=lambda: [10, 60, 300])
    timer_idle_poll_s: int = 60
    conversation_meta_messages: int = 20
    conversation_meta_delay_s: int = 20  # extraction runs this long after a turn (0: at once); a burst costs one
    conversation_meta_sweep_s: int = Field(default=5, ge=1)  # how often due extractions are queued
    # A prompt template render runs in its own thread and is stopped after this long (it is on every turn)
    template_render_timeout_s: float = Field(default=1.0, gt=0)
    # ... and refused when its output, or any value it builds, is longer than this (characters)
    template_max_output_chars: int = Field(default=2_000_000, ge=10_000)

    # Request bodies: refused (413) before they are read past these limits
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)  # any request body, app-wide
    max_import_bytes: int = Field(default=20 * 1024 * 1024, ge=1024)  # POST /api/kb/import
    max_topic_chars: int = Field(default=100_000, ge=1000)  # a topic's title, summary and facts together
    max_value_chars: int = Field(default=100_000, ge=1000)  # an attribute value or persona section (admin API)

    # Knowledge bases and document ingestion
    # inline: retrieve before every reply; agentic: the model gets a query_knowledge tool and decides
    retrieval_mode: Literal["inline", "agentic"] = "inline"
    agent_max_tool_calls: int = Field(default=4, ge=1, le=20)  # tool calls one agentic turn may make
    llm_supports_tools: bool = True  # false: the model cannot call tools, so agentic retrieval stays inline
    api_key_rate_limit_per_min: int = Field(default=60, ge=1)  # the agent API's default per-key limit
    blocked_terms: str = ""  # comma-separated words the blocked-terms guardrail refuses
    retrieval_kbs: str = ""  # comma-separated knowledge bases a turn retrieves from; empty: all of them
    max_upload_mb: int = Field(default=50, ge=1)  # one uploaded file; refused (413) past this, before it is kept
    chunking: Literal["recursive", "paragraph", "sentence", "fixed"] = "recursive"  # a new knowledge base's default
    chunk_tokens: int = Field(default=256, ge=32, le=2048)
    chunk_overlap_tokens: int = Field(default=32, ge=0, le=512)
    # Website crawls (every request through the outbound guard: SWITCHBOARD_OUTBOUND_ALLOW_HOSTS)
    crawl_max_depth: int = Field(default=2, ge=0, le=10)  # link hops from the start URL
    crawl_max_pages: int = Field(default=50, ge=1, le=10_000)  # pages one crawl of a site keeps
    crawl_delay_s: float = Field(default=1.0, ge=0)  # between two requests to the site (its Crawl-delay if longer)
    crawl_max_page_mb: float = Field(default=5.0, gt=0)  # a larger page is reported and skipped
    outbound_timeout_s: float = Field(default=15.0, gt=0)  # one try of one outbound request
    outbound_retries: int = Field(default=2, ge=0, le=10)  # more tries after a timeout, 429 or 5xx, with backoff
    # Citations: structured (sources in the payload only), inline ([N] context and instruction), footnote
    # (the same, and channels append a numbered source list), none; verify removes [N] naming no source.
    citations_format: CitationFormat = "structured"
    citations_verify: bool = True
    # HTTP surface (issue 15, the fuzzed OpenAPI): a console live-update stream (/admin/conversations/events) ends
    # after this long and the browser reconnects at once, so an open tab never holds a shutdown longer than this.
    console_events_life_s: float = Field(default=15.0, gt=0, le=3600)

    # Rate limits (README "Rate limits"): counted in Redis, shared by every replica; a count of 0 turns one off.
    # The client address is the socket's peer; X-Forwarded-For is believed only from these proxies.
    trusted_proxies: str = ""  # comma-separated addresses or CIDRs of the proxies in front of the gateway
    webchat_sessions_per_address: int = Field(default=30, ge=0)  # new web-chat sessions per address per window
    webchat_sessions_window_s: int = Field(default=60, ge=1)
    webchat_messages_per_address: int = Field(default=120, ge=0)  # web-chat messages per address per window
    webchat_messages_per_session: int = Field(default=20, ge=0)  # ... and per session per window
    webchat_messages_window_s: int = Field(default=60, ge=1)
    admin_token_failures_per_address: int = Field(default=10, ge=0)  # then even the right token waits
    admin_token_failures_window_s: int = Field(default=300, ge=1)
    webchat_idle_ttl_s: int = Field(default=30 * 24 * 3600, ge=1)  # an unused web-chat session and persona expire

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies_are_addresses(cls, value: str) -> str:
        for part in filter(None, (p.strip() for p in value.split(","))):
            try:
                ipaddress.ip_network(part, strict=False)
            except ValueError:
                raise ValueError(f"{part!r} is not an address or CIDR") from None
        return value

    # Exposure: secrets and headers (README "Exposed to the internet: headers, CORS, docs, metrics")
    widget_origins: str = "*"  # comma-separated origins whose pages may call /api/chat and frame /chat; * any
    api_docs: bool = True  # false: no /docs, /redoc or /openapi.json
    metrics_token: SecretStr | None = None  # set: GET /metrics needs Authorization: Bearer <token>

    # Turn speed: at most this many turns per process in their CPU-heavy phases at once (accepting a
    # message, reading memory, building the prompt), so webhook acks in the same process are not queued
    # behind a burst of turns; slow waits (lock, retrieval, LLM, vendor) hold no slot. 0: no bound
    turn_cpu_slots: int = Field(default=4, ge=0)

    # intake (issue 26): limits on what a hostile page, data source or file can make the gateway hold
    outbound_max_compression_ratio: float = Field(default=100.0, ge=1.0, description=(
        "Largest decoded-to-wire size ratio of a gzip/deflate response (crawl, data injection, reranker) "
        "once it passes 1 MiB decoded; a larger ratio stops the fetch as a compression bomb. The size caps "
        "(SWITCHBOARD_CRAWL_MAX_PAGE_MB, SWITCHBOARD_DATA_INJECTION_MAX_BYTES) count decoded bytes."))
    chunk_max_chars: int = Field(default=4000, ge=200, description=(
        "Hard cap on one chunk's length in characters, whatever the chunking options; a longer unbroken "
        "token is split. The token cap is the chunking options' chunk_tokens."))
    extract_max_unzipped_mb: float = Field(default=100.0, gt=0, description=(
        "Largest total uncompressed size of a zip-based document (DOCX), checked before parsing."))
    extract_max_zip_ratio: float = Field(default=100.0, ge=1.0, description=(
        "Largest uncompressed-to-compressed ratio of a zip-based document (DOCX) or of any one member, "
        "checked before parsing once a member passes 1 MiB."))
    extract_timeout_s: float = Field(default=120.0, gt=0, description=(
        "Wall-clock budget for extracting and chunking one document; the child process doing it is "
        "killed when it runs over, and the document fails with that reason."))
    extract_max_memory_mb: int = Field(default=1024, ge=128, description=(
        "Address-space limit of the child process that extracts one document; a document needing more "
        "fails with that reason instead of growing the gateway."))
    shutdown_grace_s: float = Field(default=20.0, gt=0, description=(
        "On SIGTERM, how long `switchboard serve` waits for requests in flight (an upload being "
        "extracted, a turn) before it cancels them; a cancelled upload kills its extraction and records "
        "the document as stopped."))

    def secret_values(self) -> list[str]:
        """Every configured secret (tokens, keys, passwords, signing secrets), for log redaction."""
        found: list[str] = []
        for name in type(self).model_fields:
            value = getattr(self, name)
            values = value.values() if isinstance(value, dict) else [value]
            found += [v.get_secret_value() for v in values if isinstance(v, SecretStr) and v.get_secret_value()]
        return found

    @property
    def widget_origin_list(self) -> list[str]:
        """The configured widget origins, ``["*"]`` for any."""
        origins = [o.strip().rstrip("/") for o in self.widget_origins.split(",") if o.strip()]
        return ["*"] if not origins or "*" in origins else origins

    def retrieval_controls(self) -> RetrievalControls:
        """The controls these settings give (validated: a bad value raises, naming the field)."""
        return RetrievalControls.model_validate({name: getattr(self, name) for name in CONTROL_FIELDS})

    @property
    def llm_configured(self) -> bool:
        """A key, or an explicit non-OpenAI base URL (Ollama, vLLM, llama.cpp need no key)."""
        return self.llm_api_key is not None or self.llm_base_url.rstrip("/") != OPENAI_DEFAULT_BASE

    @property
    def embedded(self) -> bool:
        return self.redis_url is None

    def queue_name(self, name: str) -> str:
        """RQ queue names are namespaced by agent like every other key."""
        return f"sb:{self.agent_id}:{name}"
