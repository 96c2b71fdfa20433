"""Channel adapters: one module per vendor, listed in ``channels.registry``."""
