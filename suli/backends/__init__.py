"""Search backends: OpenSearch (production), embedded SQLite (default without a server) and an
in-memory one for unit tests of the core (memory.py; not selectable in settings)."""
