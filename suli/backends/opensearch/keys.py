"""Storage keys: every item and board id is a key within its workspace.

A workspace never shares an id space with another, so ids cannot collide, race or be
squatted across workspaces, and no write or lookup can tell one workspace about another.
"""

from __future__ import annotations

# Workspace and item ids match suli.validate's `_ID` ([A-Za-z0-9_.:-]), which has no "/":
# the first "/" of a key always ends its workspace.
SEP = "/"


def key(workspace: str, item_id: str) -> str:
    """The storage key (OpenSearch `_id`) of item_id in workspace."""
    return f"{workspace}{SEP}{item_id}"


def split(stored: str) -> tuple[str, str]:
    """(workspace, id) of a key made by `key`."""
    workspace, _, item_id = stored.partition(SEP)
    return workspace, item_id
