"""Agents other software configures, versions and invokes over HTTP (the agent API)."""
