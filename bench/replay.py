"""Replaying the requests Suli's searches make, on an index the scale bench loaded.

Shared by bench.engine_cpu, bench.core_cpu and the scale bench's latency phase: the same
command line (`--url --n --queries --rounds --prefix --out`), the requests each query's first
page made (its legs' `LegQuery`, its page's `PageQuery`), and the report written with the
command that produced it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from suli.backends.base import LegQuery, LegResults, Page, PageQuery
from suli.models import SearchRequest

if TYPE_CHECKING:  # the scale bench's latency phase imports this module
    from bench.scale_cluster.size import SizeRun


def loaded_run(
    doc: str,
    argv: Sequence[str] | None,
    more: Callable[[argparse.ArgumentParser], None] | None = None,
) -> tuple[argparse.Namespace, SizeRun]:
    """The command line of a replay bench (its description: the first line of `doc`; `more`
    adds the bench's own arguments) and the scale bench's run over the loaded index it names."""
    from bench.scale_cluster.run import parse_args
    from bench.scale_cluster.size import SizeRun

    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--prefix", default="bench-sc", help="the scale bench's --prefix")
    ap.add_argument("--out", type=Path)
    if more is not None:
        more(ap)
    args = ap.parse_args(argv)
    scale = parse_args(["--url", args.url, "--sizes", str(args.n), "--queries", str(args.queries),
                        "--prefix", args.prefix])  # fmt: skip
    run = SizeRun(scale, args.url, 3, args.n)
    run.require_loaded()
    return args, run


@dataclass
class Recorded:
    """Per query text, the first legs' request and the first page request its search made
    (a query whose legs found nothing made no page request)."""

    legs: dict[str, LegQuery] = field(default_factory=dict)
    pages: dict[str, PageQuery] = field(default_factory=dict)


def recorded(run: SizeRun, texts: Sequence[str]) -> Recorded:
    """Each query's first page through `Searcher.search` (limit 10), its requests kept."""
    backend = run.backend
    search, page = backend.search, backend.page
    out = Recorded()
    now = ""

    def keep_legs(q: LegQuery) -> LegResults:
        out.legs.setdefault(now, q)
        return search(q)

    def keep_page(q: PageQuery) -> Page:
        out.pages.setdefault(now, q)
        return page(q)

    backend.search = keep_legs  # type: ignore[method-assign,assignment]
    backend.page = keep_page  # type: ignore[method-assign,assignment]
    try:
        for now in texts:
            run.searcher.search(run.principal, SearchRequest(query=now, limit=10))
    finally:
        backend.search = search  # type: ignore[method-assign]
        backend.page = page  # type: ignore[method-assign]
    return out


def report(module: str, args: argparse.Namespace, argv: Sequence[str] | None,
           got: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """Print the report; with --out, write it below the command that produced it."""
    text = json.dumps(got, indent=2)
    print(text)
    if args.out:
        given = " ".join(sys.argv[1:] if argv is None else argv)
        args.out.write_text(f"$ python -m {module} {given}\n{text}\n")
    return got
