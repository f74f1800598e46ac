"""Files that hold item data (exports, rejects files, the vector cache, the embedded store)
are created readable by their owner only, whatever the umask.

Items carry every tenant's text, personal uploads and hidden items; a file the default umask
leaves world-readable (0644) would hand them to any local user.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

PRIVATE = 0o600


def open_private(path: str | Path) -> IO[str]:
    """Open path for writing text (truncated, UTF-8), mode 0600 even when it already existed:
    what is written now is item data whoever could read the old file."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE)
    try:
        # The mode given to open() is cut by the umask (0o277 would leave 0400) and applies
        # only to a new file; fchmod sets exactly 0600 either way.
        os.fchmod(fd, PRIVATE)
    except OSError:
        os.close(fd)
        raise
    return os.fdopen(fd, "w", encoding="utf-8")


def create_private(path: str | Path) -> None:
    """Create path empty with mode 0600 if it does not exist (a database about to be opened);
    an existing file keeps its mode, which its owner may have chosen."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, PRIVATE)
    finally:
        os.close(fd)
