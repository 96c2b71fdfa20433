"""The operator web UI (server-rendered Jinja2). Nothing imports this package; it plugs in."""
