"""Insight (issue 41): customers' feedback, conversation outcomes and model cost, counted by hour as
they happen so a report over any range reads counters, never conversations."""
