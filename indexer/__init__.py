"""Indexing: read + validate -> embed -> bulk upsert; every input line ends indexed or rejected."""
