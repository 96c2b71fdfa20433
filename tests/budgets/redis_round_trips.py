"""How many Redis round trips one turn may cost, per entry: counted on the wire by
``tests/budgets/test_turn_round_trips.py`` (everything the turn causes, including work after the reply
and the inbox reader's wake-ups). A change that adds a round trip fails that test: fold it into an
existing pipeline or Lua call, or raise the number here on purpose and say why in the commit.

Issue 27's targets are web chat <= 6, inbox <= 8, invoke <= 6; these are what the turn costs today.
"""

WEB_CHAT_TURN = 28
INBOX_TURN = 30
INVOKE = 25  # one path (issue 27): an invoke now takes the handoff gate, turn lock and trace like any turn
