"""The turn: its types and ports, the pipeline, the runner, responders and the LLM client."""
