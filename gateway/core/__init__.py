"""Bottom layer: typed models, settings, errors, events, clock, metrics, logs."""
