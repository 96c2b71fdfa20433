"""Microsoft Teams through the Bot Framework (kind ``teams``)."""
