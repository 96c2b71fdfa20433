"""How many Redis round trips one turn may cost, per entry: counted on the wire by
``tests/channels/test_turn_round_trips.py`` (everything the turn causes, including work after the reply
and, for an inbox turn, the webhook's push and the reader's wake-up). A change that adds a round trip
fails that test: fold it into an existing pipeline or Lua call, or raise the number here on purpose and
say why in the commit. What each trip reads and writes: docs/architecture/turn.md.
"""

WEB_CHAT_TURN = 6  # issue 27's target; was 28: session + limits, the turn's five (arrival … closing)
INBOX_TURN = 8  # issue 27's target; was 30: the webhook's push, the reader, the chat's order lock, the turn's five
INVOKE = 6  # issue 27's target; was 15 on the second path: the caller (key, agent, version, limit), the turn's five
# issue 40: a turn whose model calls a tool — the web chat turn's, the round's journal write (its result, and the
# handoff state read with it) and, at most once a second per process, the tool sources' listing (one HGETALL;
# was two reads, +3, before the sources moved into one hash)
WEB_CHAT_TOOL_TURN = WEB_CHAT_TURN + 2
