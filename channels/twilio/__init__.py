"""Twilio: the REST client and signed webhooks (``rest``), SMS (``sms``), voice by Gather (``voice``)
and ConversationRelay (``relay``, ``relay_tickets``), WhatsApp senders (``whatsapp``) and accounts
added as connections (``connection``, ``voice_connection``; ``line``: which number a call reached).
"""
