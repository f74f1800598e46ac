"""Where `suli index` puts rejected lines, what it says when it cannot, and which files
`suli status` counts as rejects."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import click

from indexer.lines import Rejection, write_rejects

SHOWN = 20  # reasons listed on stderr when the rejects file holds them all
# The names Suli gives the rejects files it writes: `suli index` (FILE.rejects.jsonl, or one
# per stdin run) and `suli reindex` (reindex-<index>.jsonl in $SULI_HOME/rejects). In a
# folder only these count: the inputs kept beside them are not rejects.
PATTERNS = ("*.rejects.jsonl", "reindex-*.jsonl")


def default_rejects_path(file: str, home: Path) -> Path:
    """FILE.rejects.jsonl beside FILE; for stdin, a new file in $SULI_HOME/rejects (never the
    current directory, which may be anything), named by the run's UTC time."""
    if file != "-":
        return Path(file + ".rejects.jsonl")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    return home / "rejects" / f"stdin-{stamp}.rejects.jsonl"


def save_rejects(path: str, rejected: list[Rejection]) -> str | None:
    """Write the rejects file (mode 0600; its folder created 0700 when missing); None when
    written, else the error to print, naming the path and the way out."""
    try:
        Path(path).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_rejects(path, rejected)
    except OSError as e:
        why = e.strerror or e.__class__.__name__
        return (
            f"cannot write the rejects file {path}: {why}; the {len(rejected)} rejected "
            "line(s) are listed above with their reasons. Re-run with --rejects PATH "
            "(a file in a folder you can write) to keep them"
        )
    return None


def echo_rejects(rejected: Sequence[Rejection], path: str | None, *, every: bool) -> None:
    """The reasons on stderr: the first SHOWN and where the rest are, or every one when the
    file could not be written (then this is the only record of them)."""
    shown = rejected if every else rejected[:SHOWN]
    for r in shown:
        ident = f" ({r.id})" if r.id else ""
        click.echo(f"  line {r.line}{ident}: {r.reason}", err=True)
    if rejected and not every:
        more = f" ({len(rejected) - SHOWN} more there)" if len(rejected) > SHOWN else ""
        click.echo(f"  rejects written to {path}{more}", err=True)


def rejects_files(paths: Iterable[Path]) -> list[Path]:
    """The files to count: a named file as given; in a folder, only rejects files by name."""
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = {f for pattern in PATTERNS for f in path.glob(pattern) if f.is_file()}
            out.extend(sorted(found))
        else:
            out.append(path)
    return out
