"""Prometheus metrics, one registry per app so several apps (tests, agents) can live in one process."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_STAGE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.turns = Counter("switchboard_turns", "Turns completed", ["channel", "responder"], registry=r)
        self.turn_seconds = Histogram(
            "switchboard_turn_seconds", "Turn latency", ["channel"], buckets=_STAGE_BUCKETS, registry=r
        )
        self.stage_seconds = Histogram(
            "switchboard_stage_seconds", "Per-stage latency", ["stage"], buckets=_STAGE_BUCKETS, registry=r
        )
        self.llm_errors = Counter("switchboard_llm_errors", "LLM failures", ["kind"], registry=r)
        self.duplicates = Counter(
            "switchboard_duplicate_messages", "Deliveries ignored as duplicates", ["channel"], registry=r
        )
        self.rejected = Counter(
            "switchboard_rejected_requests", "Requests refused (signature, validation)",
            ["channel", "reason"], registry=r,
        )
        self.delivery_failures = Counter(
            "switchboard_delivery_failures", "Replies a channel could not deliver", ["channel"], registry=r
        )
        self.semantic_cache = Counter(
            "switchboard_semantic_cache_lookups", "Semantic-cache lookups by outcome (hit, miss, stale, error)",
            ["outcome"], registry=r,
        )
        self.semantic_cache_entries = Gauge(
            "switchboard_semantic_cache_entries", "Entries in the semantic cache (read at scrape)", registry=r
        )
        self.queue_depth = Gauge("switchboard_queue_depth", "Jobs waiting per RQ queue", ["queue"], registry=r)
        self.job_failures = Counter("switchboard_job_failures", "Background job failures", ["job"], registry=r)
        self.inbox_dead = Counter(
            "switchboard_inbox_dead_letters", "Deliveries parked as impossible to process", ["channel"], registry=r
        )
        self.inbox_reclaimed = Counter(
            "switchboard_inbox_reclaimed", "Deliveries taken up again (their consumer went away, or they failed)",
            ["channel"],
            registry=r,
        )
        self.inbox_waiting = Counter(
            "switchboard_inbox_retry_waits", "Times a delivery was set to wait and be tried again (vendor away)",
            ["channel"], registry=r,
        )
        self.inbox_loop_errors = Counter(
            "switchboard_inbox_loop_errors",
            "Failures of an inbox consumer's loop, per step (read, reclaim: they back off; keep_alive)",
            ["step"], registry=r,
        )
        self.rate_limited = Counter(
            "switchboard_rate_limited", "Requests refused by a rate limit, per limit (docs: Security, Rate limits)",
            ["limit"], registry=r,
        )
        # insight (issue 41): the same figures as GET /api/insights, by agent ("" the channels') and channel
        self.insight_feedback = Counter(
            "switchboard_feedback", "Ratings of bot replies (a changed vote counts again)",
            ["agent", "channel", "rating"], registry=r,
        )
        self.insight_outcomes = Counter(
            "switchboard_conversation_outcomes", "Conversations by outcome, each counted once per outcome "
            "(resolved, handed_off, unanswered, abandoned)", ["agent", "channel", "outcome"], registry=r,
        )
        self.insight_tokens = Counter(
            "switchboard_model_tokens", "Model tokens of turns' model calls (and of jobs' calls made for them)",
            ["agent", "channel", "kind"], registry=r,
        )
        self.insight_cost = Counter(
            "switchboard_model_cost", "Model cost of turns' model calls (SWITCHBOARD_MODEL_PRICES' currency)",
            ["agent", "channel"], registry=r,
        )
