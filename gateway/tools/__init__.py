"""Tools the agent may call: sources (MCP servers), their listings, and the calls a turn makes."""
