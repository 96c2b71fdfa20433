"""The web chat and widget: the adapter (``adapter``: pages, messages, streaming), visitor sessions
(``sessions``), turn state (``turns``) and the pages' files (``static``).
"""
