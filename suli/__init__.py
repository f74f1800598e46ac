"""Suli: permission-aware hybrid search for work items."""

__version__ = "0.1.0"
