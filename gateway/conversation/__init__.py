"""Conversation state: the Redis store, attributes, memory, sessions, the turn lock."""
