"""Switchboard gateway: settings, conversation core, turn pipeline, jobs and the HTTP app."""
