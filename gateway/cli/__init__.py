"""The ``switchboard`` command."""
