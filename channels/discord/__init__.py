"""Discord: a bot's messages through the Gateway WebSocket, ``/ask`` through the Interactions endpoint."""
