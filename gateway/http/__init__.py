"""The HTTP surface: the app factory, error mapping, request guards and the admin API routes."""
