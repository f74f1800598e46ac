"""Search backends: OpenSearch (production) and embedded SQLite (default without a server)."""
