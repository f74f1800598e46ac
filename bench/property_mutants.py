"""Mutation check of the rule tests: plant each bug in today's code, see which test catches it.

Each mutant is monkeypatched into a child pytest process only (this module is loaded there
as a plugin, `-p bench.property_mutants`, and plants $SULI_MUTANT at configure time; nothing
is written to the source tree). Every mutant replaces a function the current read, write or
HTTP path really calls, and must be caught by the unit tier (`pytest -m unit`) or by the
embedded contract suite (`tests/contract/test_embedded.py`); the run without a mutant must
pass both. The first failing test of each run is reported.

Run from the repo root:
  .venv/bin/python -m bench.property_mutants [--only NAME] [--runs unit,embedded contract,service]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

Patch = list[tuple[Any, str, Any]]
RUNS = {
    "unit": ["-m", "unit"],
    "embedded contract": ["tests/contract/test_embedded.py"],
    # A subset of the unit tier: the Searcher's rules over the in-memory backend alone.
    "service": sorted(str(p.relative_to(REPO)) for p in REPO.glob("tests/unit/test_service_*.py")),
}


def _modules(names: Sequence[str], attr: str) -> list[Any]:
    """The loadable modules among `names` that hold `attr` (a module another change renamed
    or split is skipped, not an error)."""
    out = []
    for name in names:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(mod, attr):
            out.append(mod)
    return out


def _wide(backend: Any, vis: Any) -> Any:
    """`vis` granted every board its workspace has an ACL for (what a missing check yields)."""
    from suli.visibility import Visibility

    if vis.stored is not None:
        return vis
    boards = vis.boards | {a.board for a in backend.acls(vis.workspace)}
    return Visibility(vis.workspace, vis.principal_id, frozenset(boards))


# ---- the mutants: (object, attribute, replacement) -------------------------------------------


def _groups_ignored() -> Patch:
    """The visibility spec built from ACL members only."""
    from suli.visibility import Visibility

    def visibility_for(principal: Any, acls: Any) -> Visibility:
        boards = frozenset(
            a.board
            for a in acls
            if a.workspace == principal.workspace and principal.id in a.members
        )
        return Visibility(principal.workspace, principal.id, boards)

    where = ["suli.visibility", "suli.service", "suli.backends.opensearch.visibility"]
    return [(m, "visibility_for", visibility_for) for m in _modules(where, "visibility_for")]


def _cursor_unbound() -> Patch:
    """A cursor is read as the principal it names, whoever sends it."""
    from suli import cursor

    read0 = cursor.read

    def read(secret: bytes, token: str, principal_id: str, req: Any) -> int:
        with contextlib.suppress(Exception):
            principal_id = json.loads(cursor._unb64(token.split(".")[0]))["p"]
        return read0(secret, token, principal_id, req)

    return [(cursor, "read", read)]


def _facets_over_all() -> Patch:
    """Facet values and counts taken over every board of the workspace."""
    from suli.service import Searcher

    facets0 = Searcher._facets

    def _facets(self: Any, vis: Any, *args: Any, **kw: Any) -> Any:
        return facets0(self, _wide(self.backend, vis), *args, **kw)

    return [(Searcher, "_facets", _facets)]


def _floor_disabled() -> Patch:
    """The meaning-only keep rule without its absolute floor."""
    from suli import ranking

    keep0 = ranking.keep

    def keep(fused: Any, best: Any, margin: float, floor: float = -1.0) -> Any:
        return keep0(fused, best, margin, -1.0)

    return [(ranking, "keep", keep)]


def _stopwords_inverted() -> Patch:
    """Common words count as words except when the query has nothing else."""
    from suli import service
    from suli.text import only_common_words, words

    def inverted(text: str) -> bool:
        return bool(words(text)) and not only_common_words(text)

    return [(service, "only_common_words", inverted)]


def _superseded_leaks() -> Patch:
    """superseded_by keeps naming a replacement the caller cannot see."""
    from suli.service import Searcher

    def resolve(self: Any, vis: Any, results: list[Any]) -> list[Any]:
        return results

    return [(Searcher, "_resolve_superseded", resolve)]


def _total_counts_invisible() -> Patch:
    """`total` (and its facets) counted over every board of the workspace."""
    from suli.service import Searcher

    count0 = Searcher._count

    def _count(self: Any, vis: Any, req: Any, query: Any, legs: Any, *rest: Any) -> Any:
        wide = _wide(self.backend, vis)
        if query.text is not None and "text" not in legs.errors:
            every = self.backend.search(replace(query, vis=wide, vector=None, depth=1))
            legs = replace(legs, text_total=every.text_total)
        return count0(self, wide, req, query, legs, *rest)

    return [(Searcher, "_count", _count)]


def _outcomes_reversed() -> Patch:
    """Each outcome weighed as its opposite (approved as abandoned, and so on)."""
    from suli import ranking
    from suli.models import OUTCOMES

    weight0 = ranking.outcome_weight
    mirror = dict(zip(OUTCOMES, reversed(OUTCOMES), strict=True))

    def outcome_weight(outcome: str | None, weights: Any) -> float:
        return weight0(mirror.get(outcome or "", outcome), weights)

    return [(ranking, "outcome_weight", outcome_weight)]


def _refill_wrong() -> Patch:
    """The rate limiter's bucket refills ten times too fast."""
    from app.ratelimit import RateLimiter

    init0 = RateLimiter.__init__

    def __init__(self: Any, per_minute: int, per_day: int, *a: Any, **kw: Any) -> None:
        init0(self, per_minute, per_day, *a, **kw)
        self._rate = per_minute / 6.0

    return [(RateLimiter, "__init__", __init__)]


def _rejections_dropped() -> Patch:
    """A store's write outcome loses the items it refused (they vanish unreported)."""
    from suli.backends.embedded import EmbeddedBackend
    from suli.backends.memory import MemoryBackend

    patch: Patch = []
    for cls in (EmbeddedBackend, MemoryBackend):
        upsert0 = cls.upsert

        def upsert(self: Any, items: Any, _upsert0: Callable[..., Any] = upsert0) -> Any:
            return replace(_upsert0(self, items), rejected={})

        patch.append((cls, "upsert", upsert))
    return patch


MUTANTS: dict[str, Callable[[], Patch]] = {
    "visibility groups ignored": _groups_ignored,
    "cursor not bound to the caller": _cursor_unbound,
    "facets over all items": _facets_over_all,
    "meaning floor disabled": _floor_disabled,
    "stopword rule inverted": _stopwords_inverted,
    "superseded naming leaks the id": _superseded_leaks,
    "total counting invisible items": _total_counts_invisible,
    "outcome weights reversed": _outcomes_reversed,
    "rate-limit refill wrong": _refill_wrong,
    "store rejections dropped": _rejections_dropped,
}


def pytest_configure(config: Any) -> None:
    """As a pytest plugin (-p bench.property_mutants): plant $SULI_MUTANT for the whole run."""
    name = os.environ.get("SULI_MUTANT")
    if name:
        for obj, attr, value in MUTANTS[name]():
            setattr(obj, attr, value)


# ---- running ---------------------------------------------------------------------------------


def run(mutant: str | None, args: Sequence[str]) -> tuple[int, str, float]:
    """(pytest exit code, the first failing test or pytest's last line, seconds)."""
    cmd = [sys.executable, "-m", "pytest", *args, "-x", "-q", "-p", "no:cacheprovider"]
    cmd += ["-p", "bench.property_mutants"]
    env = {k: v for k, v in os.environ.items() if k != "SULI_MUTANT"}
    if mutant:
        env["SULI_MUTANT"] = mutant
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    took = time.perf_counter() - t0
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", done.stdout, re.MULTILINE)
    lines = [ln for ln in done.stdout.splitlines() if ln.strip()]
    return done.returncode, failed[0] if failed else (lines[-1] if lines else ""), took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--only", help="one mutant by name")
    ap.add_argument(
        "--runs", default="unit,embedded contract", help=f"comma-separated, of: {', '.join(RUNS)}"
    )
    args = ap.parse_args()
    names = [args.only] if args.only else list(MUTANTS)
    runs = {k: RUNS[k] for k in args.runs.split(",")}
    bad = 0
    for label, pytest_args in runs.items():
        code, last, took = run(None, pytest_args)
        print(f"[no mutant] {label}: exit {code} ({took:.0f}s) {last}", flush=True)
        bad += code != 0
    for name in names:
        caught = []
        for label, pytest_args in runs.items():
            code, first, took = run(name, pytest_args)
            if code == 1:  # a test failed (2 and up: pytest itself could not run)
                caught.append(label)
            print(f"[{name}] {label}: exit {code} ({took:.0f}s) {first}", flush=True)
        print(f"[{name}] {'caught by ' + ' and '.join(caught) if caught else 'NOT CAUGHT'}")
        bad += not caught
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
