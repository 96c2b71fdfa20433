"""RQ job functions for the knowledge base: thin, ids in → service call."""

from __future__ import annotations

from gateway.jobs.registry import run_job


def prepare_rag_context_job(agent_id: str, persona_id: str, query: str, exclude_message_id: str | None) -> dict:
    """Run PrepareRagContext in the process that owns the knowledge base; return the retrieval trace."""
    from gateway.knowledge.rag_preparation import retrieval_trace

    async def work(services):
        result = await services.rag.prepare_for(persona_id, query, exclude_message_id)
        return retrieval_trace(result).model_dump(mode="json")

    return run_job(agent_id, work)
