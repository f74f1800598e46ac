"""The `suli` command line."""
