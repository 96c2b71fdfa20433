"""Slack: the environment's app (``adapter``: Events API, sending), the ``auth.test`` check (``check``)
and apps added as connections (``connection``).
"""
