"""Prompt assembly and live context: templates, sections, calendar, feeds, data injection, timers."""
