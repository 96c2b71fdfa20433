"""Telegram: the environment's bot (``adapter``: webhook or polling, sending), the update parser
(``updates``) and bots added as connections (``connection``).
"""
