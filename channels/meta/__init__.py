"""Meta's platforms: WhatsApp Cloud API, Messenger and Instagram direct messages, one webhook family."""
