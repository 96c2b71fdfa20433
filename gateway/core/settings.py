"""Settings are read once from the environment (prefix ``SWITCHBOARD_``) and an optional ``.env``.

Nothing else in the code base reads ``os.environ``: a ``Settings`` instance is built at the top
(CLI, app factory, worker) and passed down by constructor.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from gateway.core.models import CitationFormat
from rag_core.controls import CONTROL_FIELDS, RetrievalControls

OPENAI_DEFAULT_BASE = "https://api.openai.com/v1"


class ModelPrice(BaseModel):
    """A model's price in currency units per million tokens (``SWITCHBOARD_MODEL_PRICES``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    input: float = Field(ge=0)
    output: float = Field(ge=0)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="SWITCHBOARD_", env_file=".env", env_file_encoding="utf-8", extra="ignore",
        populate_by_name=True, env_ignore_empty=True,
    )

    @classmethod
    def load(cls) -> Settings:
        """The settings a process runs with: its environment, then the env file (``SWITCHBOARD_ENV_FILE``)."""
        return cls(_env_file=os.environ.get("SWITCHBOARD_ENV_FILE", ".env") or None)

    agent_id: str = Field(
        default="default", pattern=r"^[A-Za-z0-9_-]{1,64}$",
        description="The namespace of every Redis key and RQ queue (`sb:<agent_id>:`), so several agents can share one "
        "Redis; also the id of the agent the channels answer with.",
    )
    data_dir: Path = Field(
        Path("./data"), description="Where the embedded Redis and Qdrant, kept documents and model copies live."
    )
    redis_url: str | None = Field(
        None, description="An external Redis (`redis://...`); unset: an embedded Redis server under the data dir. "
        "Needed for `switchboard worker` and for several replicas.",
    )
    qdrant_url: str | None = Field(
        None, description="An external Qdrant server; `:memory:` for an in-memory one; unset: Qdrant local mode "
        "under the data dir.",
    )
    public_url: str = Field(
        "http://127.0.0.1:8000", description="The address vendors and browsers reach the gateway at: webhook URLs are "
        "built from it and Twilio signatures are checked against it; https makes the console's cookie `Secure`. "
        "Unset, `switchboard serve` uses the address it is bound to (`--host`, `--port`).",
    )
    log_level: str = Field("INFO", description="Python log level (`DEBUG`, `INFO`, `WARNING`, ...).")
    log_json: bool = Field(False, description="Log one JSON object per line instead of text.")
    demo: bool = Field(False, description="Load the demo knowledge base when the knowledge base is empty.")

    # Language model (any OpenAI-compatible server).
    llm_base_url: str = Field(
        OPENAI_DEFAULT_BASE, description="Any OpenAI-compatible server (OpenAI, Ollama, vLLM, llama.cpp): "
        "`{base}/chat/completions`. A non-default URL counts as a configured model even without a key.",
    )
    llm_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("SWITCHBOARD_LLM_API_KEY", "OPENAI_API_KEY"),
        description="The model server's key (falls back to `OPENAI_API_KEY`). Unset with the default base URL: "
        "the offline responder answers from the knowledge base.",
    )
    llm_model: str = Field("gpt-4o-mini", description="The model that writes the replies.")
    search_llm_model: str | None = Field(
        None, description="The model that selects knowledge-base articles (`llm_select`, `hybrid_llm`) and "
        "extracts conversation meta; unset: `SWITCHBOARD_LLM_MODEL`.",
    )
    llm_timeout_s: float = Field(30.0, description="Timeout of one language-model request, in seconds.")
    llm_max_retries: int = Field(2, description="Retries of a failed language-model request.")
    llm_temperature: float = Field(0.7, description="Sampling temperature of the replies.")
    structured_temperature: float = Field(
        0.2, description="Temperature of schema-constrained calls (article selection, summaries, conversation meta)."
    )
    structured_top_p: float = Field(0.0, description="`top_p` of schema-constrained calls.")
    structured_max_tokens: int = Field(4000, description="`max_tokens` of schema-constrained calls.")
    llm_fallback_message: str = Field(
        "Sorry, I can't answer right now. Please try again in a moment.",
        description="What the user gets, once, when the model fails (error, timeout, malformed or empty answer).",
    )
    offline_message: str = Field(
        "Sorry, I can't answer questions here yet. Please try again later.",
        description="What a visitor gets when there is no model and no knowledge base (the log and the console "
        "tell the operator what to set).",
    )
    offline_unknown_message: str = Field(
        "I don't know the answer to that yet.",
        description="The offline responder's answer when no topic matches the question well enough.",
    )
    offline_min_score: float = Field(
        0.5, description="Share of the question's words (stemmed, stop words dropped) the best topic must contain "
        "for the offline responder to answer with it.",
    )

    # Embeddings and retrieval.
    embeddings: Literal["fastembed", "openai", "none"] = Field(
        "fastembed", description="Dense embeddings: `fastembed` (local ONNX), `openai` (the model server's "
        "embeddings endpoint) or `none` (BM25 only).",
    )
    embedding_model: str = Field(
        "sentence-transformers/all-MiniLM-L6-v2", description="The embedding model, by name."
    )
    embedding_model_path: Path | None = Field(
        None, description="A local folder holding the embedding model, instead of a download by name."
    )
    retrieval_strategy: str | None = Field(
        None, description="`bm25`, `dense`, `hybrid`, `llm_select` or `hybrid_llm`; unset: `hybrid_llm` with a "
        "language model, `hybrid` without.",
    )
    rag_voice_wait_ms: int = Field(
        800, description="How long a voice reply waits for its queued retrieval job before going on with the "
        "previous turn's context.",
    )
    rag_top_k: int = Field(3, description="Knowledge-base results a turn puts into the prompt.")
    # Retrieval controls (rag_core.controls; each also a field of POST /api/kb/search and of an agent definition)
    relevance_threshold: float | None = Field(
        None, description="Drop results whose calibrated score (0-1) is below this."
    )
    selection_strategy: str = Field("top_k", description="`top_k`, or `mmr` (maximal marginal relevance).")
    mmr_lambda: float = Field(0.7, description="MMR's balance of relevance (1) against diversity (0).")
    max_results: int | None = Field(None, description="At most this many results, after every other control.")
    max_context_tokens: int | None = Field(
        None, description="Cap on the injected knowledge text, cut at topic boundaries."
    )
    recency_boost: float = Field(
        0.0, description="Up to this much is added to a just-updated topic's score, halving every "
        "`SWITCHBOARD_RECENCY_HALF_LIFE_DAYS`.",
    )
    recency_half_life_days: float = Field(180.0, description="Half-life of the recency boost, in days.")
    reranker: str = Field(
        "none", description="`none`, `fastembed` (a local cross-encoder) or `http` (a `/rerank` server)."
    )
    rerank_top_n: int = Field(20, description="Candidates given to the reranker.")
    final_top_k: int | None = Field(None, description="Results kept after reranking; unset: k.")
    semantic_cache: bool = Field(
        True, description="Cache finished searches in Redis, keyed by the query's embedding (with its history)."
    )
    similarity_threshold: float = Field(0.95, description="Cosine similarity a cached search must reach to be served.")
    multi_query: bool = Field(False, description="Search several phrasings of the question and fuse them (RRF).")
    query_reformulation: bool = Field(
        False, description="Have the model rewrite a follow-up question into a standalone query."
    )
    crag_confidence_threshold: float | None = Field(
        None, description="Corrective retrieval: when the best score is below this, search again with the "
        "conversation's content words.",
    )
    adaptive_routing: bool = Field(
        False, description="Route each query by rules: bm25 for identifiers and codes, dense for how/why/what "
        "questions, hybrid otherwise.",
    )
    adjacent_chunk_range: int = Field(0, description="A document chunk brings this many neighbours on each side.")
    adjacent_chunk_merge: bool = Field(False, description="Merge the neighbouring chunks into one result.")
    reranker_model: str = Field(
        "Xenova/ms-marco-MiniLM-L-6-v2", description="The fastembed cross-encoder, by name."
    )
    reranker_model_path: Path | None = Field(None, description="... or a local folder holding it.")
    reranker_base_url: str | None = Field(
        None, description="The `http` reranker: `POST {base}/rerank` (Cohere, Jina, TEI, vLLM, Infinity)."
    )
    reranker_api_key: SecretStr | None = Field(None, description="Bearer key of the `http` reranker.")
    reranker_timeout_s: float = Field(
        default=5.0, gt=0, description="How long a search waits for the reranker before keeping the fused order."
    )
    query_embedding_cache: int = Field(
        default=4096, ge=0, description="Query vectors remembered per process, by exact text (0: off)."
    )
    embedding_quantize: Literal["int8", "none"] = Field(
        "int8", description="`int8`: queries are embedded through an int8 copy of the model (4.3 instead of "
        "6.8 ms a query, hit@1 unchanged); documents keep the full model.",
    )
    model_cache_dir: Path | None = Field(
        None, description="Where the int8 model copy is kept; unset: `<data dir>/models`."
    )
    embedding_threads: int | None = Field(
        default=None, ge=1, le=64, description="onnxruntime threads for embedding documents; unset: its default."
    )
    query_embedding_threads: int | None = Field(
        default=1, ge=1, le=64, description="onnxruntime threads for embedding queries; unset: the same as documents."
    )
    query_batching: bool = Field(True, description="Embed concurrent turns' queries in one call.")
    semantic_cache_ttl_s: int = Field(default=3600, ge=1, description="How long a cached search lives, in seconds.")
    semantic_cache_max_entries: int = Field(
        default=10_000, ge=1, description="Cached searches kept; the oldest go first."
    )

    # Conversations.
    inactivity_timeout_s: int = Field(
        30 * 60, description="A conversation ends after this much silence; the next message starts a new one."
    )
    session_sweep_s: int = Field(default=60, ge=1, description="How often idle conversations are ended, in seconds.")
    max_message_chars: int = Field(4000, description="Longest accepted user message (longer: 413).")
    memory_count: int = Field(15, description="Earlier messages (across channels) the prompt remembers.")
    memory_max_chars: int = Field(10_000, description="Characters of remembered messages the prompt may hold.")
    # Redis: bounded waits, so a Redis that is down answers 503 quickly instead of hanging requests.
    redis_connect_timeout_s: float = Field(
        default=2.0, gt=0, description="How long connecting to Redis may take before requests answer 503."
    )
    redis_socket_timeout_s: float = Field(
        default=5.0, gt=1, description="How long one Redis reply may take (above the inbox's 1 s blocking reads)."
    )
    redis_pool_wait_s: float = Field(
        default=20.0, gt=0, description="How long a burst waits for a free Redis connection."
    )
    turn_lock_ttl_s: int = Field(120, description="How long a turn waits for the conversation's earlier turns.")
    turn_lock_lease_s: float = Field(
        default=10.0, gt=0, description="A running turn's lease on its conversation, renewed while it runs."
    )
    turn_deadline_s: float = Field(
        default=60.0, gt=0, description="A turn's deadline: context preparation may use half; past it the "
        "fallback message answers.",
    )

    # Known gaps closed (issue 15 item 4): ordering keys, replies sent once, fenced consumers.
    order_idle_ttl_s: float = Field(
        default=24 * 3600, gt=0, description="A chat's order counters expire once it has been idle this long."
    )

    # Admin and operators.
    admin_token: SecretStr | None = Field(
        None, description="Bearer token of the admin API (`/api/...`, `/v1/agents`); unset: the admin API is off."
    )
    admin_password: SecretStr | None = Field(
        None, description="With `SWITCHBOARD_ADMIN_USER`: the first console admin, made on start if no account exists."
    )
    admin_user: str = Field("admin", description="User name of the first admin made from `SWITCHBOARD_ADMIN_PASSWORD`.")
    console_idle_s: int = Field(
        default=1800, ge=60, description="A console session ends after this long without a request."
    )
    console_max_age_s: int = Field(
        default=12 * 3600, ge=300, description="... and this long after sign-in, whatever happens."
    )
    signin_failures_per_account: int = Field(
        default=5, ge=0, description="Failed sign-ins per username per window (0: no limit)."
    )
    signin_failures_per_address: int = Field(
        default=20, ge=0, description="Failed sign-ins per client address per window (0: no limit)."
    )
    signin_window_s: int = Field(default=900, ge=1, description="The sign-in limits' window, in seconds.")
    # Handoff: an operator takes a conversation over from the console; the bot is silent meanwhile.
    handoff_idle_s: int = Field(
        default=900, ge=30, description="A handed-off conversation with no operator activity this long returns "
        "to the bot.",
    )
    handoff_phrases: str = Field(
        "talk to a human|speak to a human|talk to a person|speak to a person|real person|human agent|"
        "talk to someone|speak to someone|talk to an operator|speak to an operator|customer service representative",
        description="A user message containing one of these (case-insensitive, `|`-separated) asks for a person.",
    )
    handoff_llm_signal: bool = Field(
        True, description="The model may end its reply with `[HANDOFF]` to ask for a person."
    )
    handoff_message: str = Field(
        "I'm passing you to a colleague. Someone will reply here as soon as possible.",
        description="What the user is told when the conversation is handed to a person.",
    )
    handoff_return_note: str = Field(
        "No operator has replied for a while, so the assistant is answering again.",
        description="The note in the transcript when an idle handoff returns to the bot.",
    )
    # Insight (issue 41): feedback, outcomes and cost, counted by day as they happen (docs: guides/insights.md).
    model_prices: dict[str, ModelPrice] = Field(
        default_factory=dict, description='Model prices in currency units per million tokens, JSON `{"model": '
        '{"input": 0.15, "output": 0.6}}`, over the built-in table (a few common models); a model is matched by '
        "its name or the longest listed prefix of it.",
    )
    unanswered_phrases: str = Field(
        "i don't know|i do not know|i'm not sure|i am not sure|i don't have information|"
        "i do not have information|i couldn't find|i could not find",
        description="A reply containing one of these (case-insensitive, `|`-separated) counts its conversation "
        "as unanswered.",
    )
    feedback_comment_max_chars: int = Field(
        default=2000, ge=1, description="Longest comment accepted with a rating."
    )
    feedback_buttons: bool = Field(
        True, description="Telegram and Slack replies carry 👍 / 👎 buttons that rate them.",
    )
    csat_prompt: str = Field(
        "", description="SMS and WhatsApp: the closing question sent once a conversation has been idle "
        "`SWITCHBOARD_CSAT_AFTER_S` (e.g. \"How did we do? Reply 1-5.\"); its 1-5 or yes/no answer is recorded as a "
        "rating, not answered by the bot. Empty: no question.",
    )
    csat_after_s: int = Field(
        default=600, ge=1, description="A conversation idle this long (seconds) gets the closing question.",
    )
    csat_window_s: int = Field(
        default=86_400, ge=1, description="How long after the closing question an answer counts as its rating.",
    )
    insight_retention_days: int = Field(
        default=400, ge=1, description="How long the daily insight counters (and gap groups, comments) are kept, "
        "in days.",
    )
    webhook_retry_window_s: int = Field(
        default=86_400, ge=1, description="How long an event webhook's delivery is retried after the event, in "
        "seconds; then it is given up (logged as expired).",
    )
    webhook_backoff_first_s: float = Field(
        default=5.0, gt=0, description="The wait after an event webhook's first failed delivery; it doubles with "
        "each next failure.",
    )
    webhook_backoff_max_s: float = Field(
        default=600.0, gt=0, description="The longest wait between two deliveries of one event webhook.",
    )
    webhook_timeout_s: float = Field(
        default=10.0, gt=0, description="How long a webhook receiver has to answer a delivery.",
    )
    webhook_log_size: int = Field(
        default=100, ge=1, le=10_000, description="Delivery attempts kept per webhook for the console and API.",
    )

    # Channels.
    telegram_bot_token: SecretStr | None = Field(
        None, description="The bot's token from @BotFather; set: the Telegram channel is on."
    )
    telegram_webhook_secret: SecretStr | None = Field(
        None, description="Checked against `X-Telegram-Bot-Api-Secret-Token` on every webhook (1-256 characters "
        "of `A-Z a-z 0-9 _ -`).",
    )
    telegram_api_base: str = Field("https://api.telegram.org", description="The Telegram Bot API server.")
    telegram_mode: Literal["webhook", "polling"] = Field(
        "webhook", description="`webhook`, or `polling` (long-polls `getUpdates`; for development without a "
        "public URL).",
    )
    slack_bot_token: SecretStr | None = Field(None, description="The Slack app's bot token (`xoxb-...`).")
    slack_signing_secret: SecretStr | None = Field(
        None, description="The Slack app's signing secret; every event request is checked against it."
    )
    slack_api_base: str = Field("https://slack.com/api/", description="The Slack Web API.")
    twilio_account_sid: str | None = Field(None, description="The Twilio account SID (`AC...`).")
    twilio_auth_token: SecretStr | None = Field(
        None, description="The Twilio auth token; every webhook's `X-Twilio-Signature` is checked with it."
    )
    twilio_api_base: str = Field("https://api.twilio.com", description="The Twilio REST API.")
    twilio_from_number: str | None = Field(
        None, description="The number SMS replies come from when the reply's sender is not known (E.164)."
    )
    meta_api_base: str = Field(
        "https://graph.facebook.com/v21.0", description="Meta's Graph API with its version (WhatsApp Cloud API, "
        "Messenger and Instagram connections)."
    )
    discord_api_base: str = Field(
        "https://discord.com/api/v10", description="Discord's REST API with its version (Discord connections): "
        "the account check, replies, typing, threads and interaction follow-ups."
    )
    discord_gateway_url: str | None = Field(
        None, description="The Discord Gateway WebSocket URL to connect to instead of the one GET /gateway/bot "
        "answers (a local fake in tests)."
    )
    connection_listeners_poll_s: float = Field(
        2.0, gt=0, description="How often each replica reads the connections of a kind that holds a connection "
        "open (a Discord bot's Gateway): a connection added, changed or disabled is seen within this."
    )
    discord_gateway_lease_s: float = Field(
        15.0, gt=0, le=20, description="How long a replica's hold on a Discord bot's Gateway connection lasts "
        "without renewal (renewed every third of it): when the holder dies, another replica takes the connection "
        "over within four thirds of this (20 s by default) and resumes the session."
    )
    teams_openid_metadata_url: str = Field(
        "https://login.botframework.com/v1/.well-known/openidconfiguration",
        description="Where the Bot Framework's OpenID metadata is read (Teams connections): its issuer is the one "
        "every incoming activity's token must name, its jwks_uri the keys that must have signed it."
    )
    teams_token_url: str = Field(
        "https://login.microsoftonline.com/botframework.com/oauth2/v2.0/token",
        description="Where a Teams connection gets the token its replies carry (client credentials: app id and "
        "password). With a connection's tenant_id, the botframework.com segment becomes that tenant."
    )
    email_poll_s: float = Field(
        60.0, gt=0, description="How often an email connection's mailbox is looked at for new mail when its IMAP "
        "server has no IDLE (with IDLE, new mail is taken at once and the mailbox is looked at this often besides)."
    )
    email_max_bytes: int = Field(
        10_000_000, gt=0, description="The largest mail an email connection reads (its size as the IMAP server "
        "says, attachments included); a larger one is recorded by its headers with a note, its body not fetched."
    )

    # Channels (extra)
    channel_send_tries: int = Field(
        default=4, ge=1, le=10, description="Outbound send attempts per message part."
    )
    channel_retry_base_s: float = Field(
        0.5, description="First backoff after a 5xx or network error, doubled per try."
    )
    channel_retry_max_s: float = Field(
        30.0, description="The longest backoff, also the cap on a vendor's `retry_after`."
    )
    turn_drain_timeout_s: float = Field(
        20.0, description="On shutdown, how long in-flight turns may finish before they go back to the inbox."
    )
    # Inbox: webhooks queue deliveries; turn consumers (in the gateway and/or `switchboard worker`) run them
    inbox_consumer: bool = Field(
        True, description="Run turn consumers in the gateway process too (false: only `switchboard worker` runs "
        "turns).",
    )
    inbox_concurrency: int = Field(default=64, ge=1, description="Turns one process runs at once.")
    inbox_reclaim_s: float = Field(
        default=30.0, gt=0, description="A dead consumer's deliveries are resumed after this long."
    )
    inbox_stuck_warn_s: float = Field(
        default=180.0, gt=0, description="A delivery whose turn runs this long without finishing is logged "
        "once, with the awaits it is suspended in.",
    )
    # Inbox retries (vendor outages): a delivery that fails for a reason that may pass waits and is tried
    # again, with exponential backoff (jittered, capped), until the window since its first failure is over
    inbox_retry_window_s: float = Field(
        default=1800.0, gt=0, description="How long after its first failure a delivery is still tried again; then "
        "it is dead-lettered with its reason.",
    )
    inbox_retry_first_s: float = Field(
        default=2.0, gt=0, description="The first wait before a failed delivery is tried again, doubled per failure."
    )
    inbox_retry_max_s: float = Field(default=300.0, gt=0, description="The longest wait between two tries.")
    telegram_register_webhook: bool = Field(
        False, description="Call `setWebhook(PUBLIC_URL/channels/telegram/webhook)` on start."
    )
    channel_welcome_message: str = Field(
        "Hi! Ask me anything and I'll do my best to help.", description="The answer to Telegram's `/start`."
    )
    channel_unsupported_message: str = Field(
        "I can only read text for now. Please type your question (a caption on a photo works too).",
        description="The answer to photos, voice notes, stickers, locations and media-only SMS.",
    )
    sms_help_message: str = Field(
        "Text your question and we'll reply. Reply STOP to opt out, START to opt back in.",
        description="The answer to HELP / INFO by SMS.",
    )
    sms_resubscribed_message: str = Field(
        "You're subscribed again. Text your question any time.",
        description="The answer to START / YES / UNSTOP by SMS.",
    )
    voice_language: str = Field("en-US", description="Language of speech recognition and the spoken replies.")
    voice_greeting: str = Field("Hello! How can I help you today?", description="What a caller hears first.")
    voice_filler: str = Field("One moment please.", description="What a caller hears while the reply is not ready.")
    voice_reprompt: str = Field(
        "Sorry, I didn't catch that. How can I help?", description="What a caller hears after silence, once."
    )
    voice_goodbye: str = Field(
        "I haven't heard anything, so I'll hang up now. Goodbye!",
        description="What a caller hears before the call is hung up after silence.",
    )
    voice_unavailable: str = Field(
        "Sorry, I can't answer that right now. Is there anything else?",
        description="What a caller hears when no reply came in time.",
    )
    voice_reply_deadline_s: float = Field(
        5.0, description="How long one voice webhook waits for the reply before the filler and a `<Redirect>`."
    )
    voice_max_waits: int = Field(4, description="Fillers before giving up on a reply (each is one deadline).")

    # Inbound feeds and outbound fetches.
    feeds_secret: SecretStr | None = Field(
        None, description="HMAC secret of inbound data feeds (`POST /webhooks/feeds/{feed}`)."
    )
    outbound_allow_hosts: str = Field(
        "", description="Comma-separated host names or CIDRs that outbound requests (crawls, data injection, the "
        "reranker) may reach although private or loopback.",
    )

    # Prompt and live context
    feed_secrets: dict[str, SecretStr] = Field(
        default_factory=dict, description='Per-feed secrets, JSON `{"feed": "secret"}`; a feed not listed uses '
        "`SWITCHBOARD_FEEDS_SECRET`.",
    )
    feeds_max_bytes: int = Field(256 * 1024, description="Largest inbound feed body.")
    feeds_replay_window_s: int = Field(
        300, description="A feed request whose timestamp is further than this from now is refused."
    )
    prompt_budgets: dict[str, int] = Field(
        default_factory=dict, description="Token budgets of prompt sections, JSON `{section: tokens}`, over the "
        "defaults (instructions 1500, conversation_meta 600, custom_sections 1000, calendar 1000, "
        "injected_data 2000, rag 2500, memory 4000).",
    )
    data_injection_timeout_s: float = Field(15.0, description="Timeout of one data-injection fetch.")
    data_injection_max_bytes: int = Field(1_000_000, description="Largest data-injection answer read.")
    data_injection_max_tokens: int = Field(
        1500, description="Injected data longer than this is summarised (when asked) or cut."
    )
    data_injection_retry_intervals: list[int] = Field(
        default_factory=lambda: [10, 60, 300], description="Seconds between the retries of a failed data-injection "
        "fetch, JSON list.",
    )
    timer_idle_poll_s: int = Field(
        60, description="How often a switched-off timer (data injection) checks whether it was switched on."
    )
    conversation_meta_messages: int = Field(
        20, description="Recent messages the conversation-meta extraction reads."
    )
    conversation_meta_delay_s: int = Field(
        20, description="The extraction runs this long after a turn (0: at once); a burst of turns costs one."
    )
    conversation_meta_sweep_s: int = Field(
        default=5, ge=1, description="How often due conversation-meta extractions are queued."
    )
    # A prompt template render runs in its own thread and is stopped after this long (it is on every turn)
    template_render_timeout_s: float = Field(
        default=1.0, gt=0, description="A prompt template render is stopped after this long."
    )
    template_max_output_chars: int = Field(
        default=2_000_000, ge=10_000, description="A render is refused when its output, or any value it builds, "
        "is longer than this (characters).",
    )

    # Request bodies: refused (413) before they are read past these limits
    max_body_bytes: int = Field(
        default=1024 * 1024, ge=1024, description="Largest request body, app-wide (413 before it is read)."
    )
    max_import_bytes: int = Field(
        default=20 * 1024 * 1024, ge=1024, description="Largest body of `POST /api/kb/import`."
    )
    max_topic_chars: int = Field(
        default=100_000, ge=1000, description="A topic's title, summary and facts together, in characters."
    )
    max_value_chars: int = Field(
        default=100_000, ge=1000, description="An attribute value or persona section (admin API), in characters."
    )

    # Knowledge bases and document ingestion
    retrieval_mode: Literal["inline", "agentic"] = Field(
        "inline", description="`inline`: retrieve before every reply; `agentic`: the model gets a "
        "`query_knowledge` tool and decides.",
    )
    agent_max_tool_calls: int = Field(
        default=4, ge=1, le=20, description="Tool calls one agentic turn may make."
    )
    llm_supports_tools: bool = Field(
        True, description="False: the model cannot call tools, so agentic retrieval stays inline."
    )
    # tools (issue 40): what an agent's tools may cost a turn
    tool_max_rounds: int = Field(default=4, ge=1, le=20, description=(
        "Model rounds one turn may take with the agent's tools (MCP servers); the last one must answer."))
    tool_timeout_s: float = Field(default=10.0, gt=0, description=(
        "How long one tool call may take; it also ends a quarter of the turn deadline before the turn's end, "
        "so the model can still answer. A call past it reaches the model as an error result."))
    tool_result_max_chars: int = Field(default=8000, ge=100, description=(
        "A tool's answer longer than this is cut (with a note saying so) before the model reads it."))
    tool_confirm_ttl_s: int = Field(default=600, ge=1, description=(
        "How long an action a `confirm: true` tool proposed waits for the customer's yes in the next turn."))
    tool_stdio_servers: dict[str, list[str]] = Field(default_factory=dict, description=(
        "MCP servers that are a local command (stdio), JSON `{name: [program, args...]}`, e.g. "
        "`{\"stock\": [\"/usr/local/bin/stock-mcp\", \"--db\", \"/srv/stock.db\"]}`: each is a tool source "
        "(tools `stock.*`) added or brought up to date at start. Only here (the settings file or the "
        "environment) or with `switchboard tools add-stdio`, never over HTTP; the API shows them read-only."))
    api_key_rate_limit_per_min: int = Field(
        default=60, ge=1, description="The agent API's default calls per minute per key."
    )
    blocked_terms: str = Field("", description="Comma-separated words the blocked-terms guardrail refuses.")
    retrieval_kbs: str = Field(
        "", description="Comma-separated knowledge bases a turn retrieves from; empty: all of them."
    )
    max_upload_mb: int = Field(
        default=50, ge=1, description="Largest uploaded file; refused (413) past this, before it is kept."
    )
    chunking: Literal["recursive", "paragraph", "sentence", "fixed"] = Field(
        "recursive", description="A new knowledge base's default chunking."
    )
    chunk_tokens: int = Field(default=256, ge=32, le=2048, description="A new knowledge base's chunk size, in tokens.")
    chunk_overlap_tokens: int = Field(
        default=32, ge=0, le=512, description="Tokens shared by neighbouring chunks (under half the chunk size)."
    )
    # Website crawls (every request through the outbound guard: SWITCHBOARD_OUTBOUND_ALLOW_HOSTS)
    crawl_max_depth: int = Field(default=2, ge=0, le=10, description="Link hops a crawl follows from the start URL.")
    crawl_max_pages: int = Field(
        default=50, ge=1, le=10_000, description="Pages one crawl of a site keeps."
    )
    crawl_delay_s: float = Field(
        default=1.0, ge=0, description="Wait between two requests to the site (its `Crawl-delay` if longer)."
    )
    crawl_max_page_mb: float = Field(default=5.0, gt=0, description="A larger page is reported and skipped.")
    outbound_timeout_s: float = Field(default=15.0, gt=0, description="One try of one outbound request.")
    outbound_retries: int = Field(
        default=2, ge=0, le=10, description="More tries after a timeout, 429 or 5xx, with backoff."
    )
    # Citations: structured (sources in the payload only), inline ([N] context and instruction), footnote
    # (the same, and channels append a numbered source list), none; verify removes [N] naming no source.
    citations_format: CitationFormat = Field(
        "structured", description="`structured` (sources in payloads only), `inline` (the model cites `[N]`), "
        "`footnote` (the same, and channels append a numbered source list) or `none`.",
    )
    citations_verify: bool = Field(True, description="Remove `[N]` markers that name no source.")
    # HTTP surface (issue 15, the fuzzed OpenAPI): a console live-update stream (/admin/conversations/events) ends
    # after this long and the browser reconnects at once, so an open tab never holds a shutdown longer than this.
    console_events_life_s: float = Field(
        default=15.0, gt=0, le=3600, description="How long one console live-update stream lasts before the browser "
        "reconnects.",
    )

    # Rate limits (docs: security/rate-limits): counted in Redis, shared by every replica; a count of 0 turns one off.
    # The client address is the socket's peer; X-Forwarded-For is believed only from these proxies.
    trusted_proxies: str = Field(
        "", description="Comma-separated addresses or CIDRs of the proxies in front of the gateway; only from "
        "them is `X-Forwarded-For` believed.",
    )
    webchat_sessions_per_address: int = Field(
        default=30, ge=0, description="New web-chat sessions per client address per window (0: no limit)."
    )
    webchat_sessions_window_s: int = Field(default=60, ge=1, description="The web-chat session limit's window.")
    webchat_messages_per_address: int = Field(
        default=120, ge=0, description="Web-chat messages per client address per window (0: no limit)."
    )
    webchat_messages_per_session: int = Field(
        default=20, ge=0, description="Web-chat messages per session per window (0: no limit)."
    )
    webchat_messages_window_s: int = Field(default=60, ge=1, description="The web-chat message limits' window.")
    admin_token_failures_per_address: int = Field(
        default=10, ge=0, description="Wrong admin tokens per client address per window; then even the right token "
        "waits (0: no limit).",
    )
    admin_token_failures_window_s: int = Field(default=300, ge=1, description="The admin-token limit's window.")
    webchat_idle_ttl_s: int = Field(
        default=30 * 24 * 3600, ge=1, description="An unused web-chat session and its persona expire after this long."
    )

    # --- newcomer (issue 30) ---
    env_file: str = Field(
        ".env", description="The file of `SWITCHBOARD_*` lines read under the environment, relative to the working "
        "directory; empty reads none (the test suite sets it so a developer's `.env` never reaches a test). Only "
        "the environment can set it.",
    )
    sources_min_score: float = Field(
        0.01, ge=0.0, le=1.0, description="A reply lists a retrieved topic as a source only when its calibrated "
        "score (the estimated chance it answers the question, 0-1) reaches this, or the reply used it (cited it, "
        "or quotes it word for word); `SWITCHBOARD_RELEVANCE_THRESHOLD`, when higher, is the floor instead.",
    )

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies_are_addresses(cls, value: str) -> str:
        for part in filter(None, (p.strip() for p in value.split(","))):
            try:
                ipaddress.ip_network(part, strict=False)
            except ValueError:
                raise ValueError(f"{part!r} is not an address or CIDR") from None
        return value

    # Exposure: secrets and headers (docs: security)
    widget_origins: str = Field(
        "*", description="Comma-separated origins whose pages may call `/api/chat` and frame `/chat`; `*`: any."
    )
    api_docs: bool = Field(True, description="False: no `/docs`, `/redoc` or `/openapi.json`.")
    metrics_token: SecretStr | None = Field(
        None, description="Set: `GET /metrics` needs `Authorization: Bearer <token>`."
    )

    # Turn speed: at most this many turns per process in their CPU-heavy phases at once (accepting a
    # message, reading memory, building the prompt), so webhook acks in the same process are not queued
    # behind a burst of turns; slow waits (lock, retrieval, LLM, vendor) hold no slot. 0: no bound
    turn_cpu_slots: int = Field(
        default=4, ge=0, description="Turns one process runs in their CPU-heavy phases at once, so webhook acks "
        "come first (0: no bound).")
    gc_tuning: bool = Field(True, description=(
        "Once started, the gateway moves what it built out of the garbage collector's reach and collects young "
        "objects less often while it serves (fewer, shorter pauses under bursts). False for a process that "
        "starts many gateways one after another, such as a test suite: each start's full collection walks the "
        "whole process."))

    # auth branch (issue 26): sign-in limits, the semantic cache's entry cap
    signin_concurrent_checks: int = Field(default=2, ge=1, description=(
        "Password checks (argon2, ~64 MiB and one core each) one process runs at once; more wait their turn."))
    signin_known_address_days: int = Field(default=30, ge=0, description=(
        "An address that signed in to an account stays known this long: its right password passes even while "
        "the account's failure limit is reached. 0: no address is trusted past the limit."))
    semantic_cache_max_entry_bytes: int = Field(default=256 * 1024, ge=1024, description=(
        "The largest semantic-cache entry (serialized bytes) that is stored; a larger answer is not cached."))

    # conn (issue 28): channel connections
    secret_key: SecretStr | None = Field(None, description=(
        "Fernet keys that encrypt channel connections' credentials at rest, comma-separated, newest first "
        "(the first encrypts, all decrypt: put a new key in front to rotate); unset: in embedded mode a key "
        "generated on the first start into `<data dir>/secret.key` (mode 0600), with an external Redis "
        "connections with credentials cannot be added"))

    # voice relay (issue 29)
    twilio_voice_mode: Literal["relay", "gather"] = Field("relay", description=(
        "How phone calls talk: `relay` (Twilio ConversationRelay: Twilio does speech on its side and the reply "
        "is spoken while the model still writes, the caller can interrupt) or `gather` (one <Gather> per turn, "
        "the whole reply read at once)."))
    twilio_relay_rag_mode: Literal["inline", "queued"] = Field("inline", description=(
        "How a relay call's turn gets its knowledge context: `inline` (searched in the turn, as the web chat "
        "does) or `queued` (a `prepare_rag_context` RQ job, waited for up to SWITCHBOARD_RAG_VOICE_WAIT_MS, as "
        "the gather path does). Inline measured faster (`bench/voice_relay.py`)."))
    twilio_relay_voice: str | None = Field(None, description=(
        "The ConversationRelay text-to-speech voice (e.g. `en-US-Journey-O`); unset: Twilio's default for the "
        "language."))
    twilio_handoff_number: str | None = Field(None, description=(
        "The number a relay call is transferred to (<Dial>) when the caller asks for a person; unset: the agent "
        "says no one is available and the call goes on."))
    twilio_handoff_unavailable: str = Field(
        "I'm sorry, no one is available to take your call right now. I can keep helping you.", description=(
            "What a relay caller hears on asking for a person when no handoff number is set."))
    # relay (issue 38): each socket bound to its call, and bounded
    twilio_relay_ticket_ttl_s: float = Field(default=60.0, gt=0, description=(
        "How long the single-use ticket in a call's `<ConversationRelay url>` (issued by the signed voice "
        "webhook) can open the relay socket; used or expired, it opens nothing."))
    twilio_relay_setup_timeout_s: float = Field(default=5.0, gt=0, description=(
        "A relay socket that sends no `setup` within this is closed (1008)."))
    twilio_relay_idle_timeout_s: float = Field(default=300.0, gt=0, description=(
        "A relay socket that sends nothing for this long while no reply is running is closed (1000)."))
    twilio_relay_max_sockets: int = Field(default=200, ge=1, description=(
        "Relay sockets one gateway process holds at once; one more is closed at once (1013)."))
    twilio_relay_max_sockets_per_caller: int = Field(default=3, ge=1, description=(
        "Relay sockets one caller number holds at once in one gateway process; one more is closed (1013)."))
    twilio_relay_max_frame_bytes: int = Field(default=64 * 1024, ge=1024, description=(
        "Largest relay message (a frame) accepted; a larger one closes the socket (1009). A prompt's text "
        "is limited by SWITCHBOARD_MAX_MESSAGE_CHARS."))
    # phone (issue 44): keypad, languages, warm transfer, disclosure
    twilio_relay_languages: str = Field("", description=(
        "The languages a relay call may switch to, comma-separated BCP-47 codes (e.g. `en-US,de-DE,es-ES`): "
        "each is a <Language> of the ConversationRelay; the caller's language is detected from what they say "
        "and the call switches (a `language` message: recognition and voice follow) and the agent answers in "
        "it. Empty: the call stays in SWITCHBOARD_VOICE_LANGUAGE."))
    twilio_relay_dtmf_window_s: float = Field(default=1.5, gt=0, le=10, description=(
        "Keys a relay caller presses within this many seconds of each other are one turn (`[pressed 4 4 1]`)."))
    twilio_greeting_disclosure: str | None = Field(None, description=(
        "Said at the start of every call, before the greeting (e.g. \"You are speaking with an automated "
        "assistant; this call may be recorded.\"); unset: nothing."))

    @field_validator("secret_key")
    @classmethod
    def _fernet_keys(cls, value: SecretStr | None) -> SecretStr | None:
        from cryptography.fernet import Fernet  # only this setting needs it

        for key in filter(None, (k.strip() for k in (value.get_secret_value() if value else "").split(","))):
            try:
                Fernet(key)
            except ValueError:
                raise ValueError("each key must be a Fernet key (32 url-safe base64 bytes), e.g. from "
                                 "cryptography.fernet.Fernet.generate_key()") from None
        return value

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

    # media (issue 44): voice notes, photos and documents sent in a chat
    media_max_mb: float = Field(default=20.0, gt=0, description=(
        "Largest voice note, photo or document a chat may send; a vendor's declared size over it is refused "
        "before downloading, and a download is stopped as soon as it passes it. The customer gets a polite "
        "answer."))
    keep_media: bool = Field(default=False, description=(
        "Keep each downloaded media file under `{SWITCHBOARD_DATA_DIR}/media` (for debugging). Off: media "
        "is held in memory for the turn only and nothing is written to disk."))
    stt_base_url: str | None = Field(default=None, description=(
        "OpenAI-compatible speech-to-text server for voice notes (`{base}/audio/transcriptions`); unset: "
        "`SWITCHBOARD_LLM_BASE_URL` when a model is configured. With neither, voice notes get the "
        "'text only' answer."))
    stt_api_key: SecretStr | None = Field(default=None, description=(
        "The speech-to-text server's key; unset: `SWITCHBOARD_LLM_API_KEY`."))
    stt_model: str = Field(default="whisper-1", description="The speech-to-text model voice notes are sent to.")
    stt_max_seconds: float = Field(default=300.0, gt=0, description=(
        "Longest voice note transcribed; a longer one (by the vendor's word or its own header) gets a polite "
        "answer and is not sent to the speech-to-text server."))
    voice_reply: bool = Field(default=False, description=(
        "Answer a voice note with a voice note too (`{SWITCHBOARD_STT_BASE_URL}/audio/speech`, Telegram), "
        "besides the text reply."))
    tts_model: str = Field(default="tts-1", description="The text-to-speech model of `SWITCHBOARD_VOICE_REPLY`.")
    tts_voice: str = Field(default="alloy", description="The voice of `SWITCHBOARD_VOICE_REPLY`.")
    chat_document_max_tokens: int = Field(default=4000, ge=100, description=(
        "A PDF, DOCX or text file sent in a chat is given to the model, for that conversation only, cut to this "
        "many tokens (about four characters each); it never enters a knowledge base."))
    media_image_max_px: int = Field(default=1568, ge=64, description=(
        "A photo sent to a vision model (`config.vision`) is scaled down to at most this many pixels on its "
        "longer side and re-encoded as JPEG before the model sees it."))

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
