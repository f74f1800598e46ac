"""Mutation check of the leak property test: plant each visibility bug, count what catches it.

Each mutant is monkeypatched into the running process only (nothing is written to the source
tree). For each mutant and backend this runs the CI property (the same seed and number of
examples as tests/contract/rules_property.py) with every example's failure caught and counted,
and reports how many examples caught the bug and the first one that did. With --pytest it also
runs the real test under the mutant and prints pytest's last lines.

Run from the repo root (the OpenSearch backend needs SULI_TEST_OPENSEARCH_URL):
  .venv/bin/python -m bench.property_mutants [--backend embedded|opensearch|both] [--pytest]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any
from uuid import uuid4

from suli import service
from suli.backends import embedded_sql, opensearch_bodies
from suli.settings import Settings
from suli.visibility import Visibility

REPO = Path(__file__).resolve().parents[1]

Patch = list[tuple[Any, str, Any]]


# ---- the mutants: (object, attribute, replacement) -------------------------------------------


def _group_ignored() -> Patch:
    def visibility_for(principal: Any, acls: Any) -> Visibility:
        boards = frozenset(
            a.board
            for a in acls
            if a.workspace == principal.workspace and principal.id in a.members
        )
        return Visibility(principal.workspace, principal.id, boards)

    return [(service, "visibility_for", visibility_for)]


def _cross_workspace_board() -> Patch:
    """A granted board's items are visible whatever their workspace."""
    sql0, clause0 = embedded_sql.visibility_sql, opensearch_bodies.visibility_clause

    def visibility_sql(vis: Visibility) -> tuple[str, list[Any]]:
        sql, params = sql0(vis)
        if not vis.boards:
            return sql, params
        board, ps = embedded_sql._in("i.board", sorted(vis.boards))
        return f"({sql} OR {board})", params + ps

    def visibility_clause(vis: Visibility) -> dict[str, Any]:
        inner = clause0(vis)
        if not vis.boards:
            return inner
        return {
            "bool": {
                "should": [inner, {"terms": {"board": sorted(vis.boards)}}],
                "minimum_should_match": 1,
            }
        }

    return [
        (embedded_sql, "visibility_sql", visibility_sql),
        (opensearch_bodies, "visibility_clause", visibility_clause),
    ]


def _personal_visible() -> Patch:
    """Personal uploads of the workspace visible to everyone in it."""
    sql0, clause0 = embedded_sql.visibility_sql, opensearch_bodies.visibility_clause

    def visibility_sql(vis: Visibility) -> tuple[str, list[Any]]:
        sql, params = sql0(vis)
        return sql.replace("AND i.uploader = ?", "AND i.uploader != ?"), params

    def visibility_clause(vis: Visibility) -> dict[str, Any]:
        out = clause0(vis)
        for s in out["bool"]["should"]:
            f = s.get("bool", {}).get("filter")
            if f and {"term": {"scope": "personal"}} in f:
                s["bool"]["filter"] = [{"term": {"scope": "personal"}}]
        return out

    return [
        (embedded_sql, "visibility_sql", visibility_sql),
        (opensearch_bodies, "visibility_clause", visibility_clause),
    ]


def _hidden_shown() -> Patch:
    """Hidden items shown without being asked for."""
    where0, clauses0 = embedded_sql.where, opensearch_bodies.filter_clauses

    def where(vis: Any, filters: Any, regex: Any = None, *, hidden_ok: bool = False) -> Any:
        return where0(vis, filters, regex, hidden_ok=True)

    def filter_clauses(
        vis: Any, filters: Any, regex: Any = None, *, hidden_ok: bool = False
    ) -> Any:
        return clauses0(vis, filters, regex, hidden_ok=True)

    return [(embedded_sql, "where", where), (opensearch_bodies, "filter_clauses", filter_clauses)]


def _replacement_named() -> Patch:
    """superseded_by names the replacement even when the caller cannot see it."""

    def resolve(self: Any, vis: Any, results: list[Any]) -> list[Any]:
        return [replace(r) for r in results]

    return [(service.Searcher, "_resolve_superseded", resolve)]


MUTANTS: dict[str, Callable[[], Patch]] = {
    "group ignored": _group_ignored,
    "cross-workspace board": _cross_workspace_board,
    "personal upload visible to others": _personal_visible,
    "hidden shown": _hidden_shown,
    "replacement named when invisible": _replacement_named,
}


@contextlib.contextmanager
def planted(patch: Patch) -> Iterator[None]:
    saved = [(obj, name, getattr(obj, name)) for obj, name, _ in patch]
    try:
        for obj, name, value in patch:
            setattr(obj, name, value)
        yield
    finally:
        for obj, name, value in reversed(saved):
            setattr(obj, name, value)


# ---- worlds (as tests/contract/test_*.py build them) -----------------------------------------


@contextlib.contextmanager
def world(backend: str) -> Iterator[Any]:
    from contract.helpers import KeyedEmbedder, World

    emb = KeyedEmbedder()
    if backend == "embedded":
        from suli.backends.embedded import EmbeddedBackend

        with TemporaryDirectory() as tmp:
            settings = Settings(
                backend="embedded", embedded_path=Path(tmp) / "p.db", embedder="fake"
            )
            b = EmbeddedBackend(settings.sqlite_path, emb.dimension, model=emb.name)
            try:
                yield World(b, emb, settings, b.refresh)
            finally:
                b.close()
        return
    from opensearchpy import OpenSearch

    from suli.backends.opensearch import OpenSearchBackend

    url = os.environ["SULI_TEST_OPENSEARCH_URL"]
    name = f"test-{uuid4().hex}"
    settings = Settings(
        backend="opensearch",
        opensearch_url=url,
        index_alias=name,
        acl_index=f"{name}-acl",
        embedder="fake",
    )
    ob = OpenSearchBackend(settings, emb.dimension, emb.name)
    client = OpenSearch(hosts=[url])
    try:
        ob.ensure_ready()
        yield World(ob, emb, settings, ob.refresh)
    finally:
        found = client.indices.get(index=f"{name}*", ignore_unavailable=True)
        if found:
            client.indices.delete(index=",".join(found), ignore=[404])
        ob.close()
        client.close()


def count(backend: str) -> tuple[int, int, int | None, str]:
    """(examples, examples that caught the bug, first catching example, first message)."""
    sys.path.insert(0, str(REPO / "tests"))
    from contract import rules_property as rp
    from hypothesis import given

    n = rp.examples(backend)
    caught: list[tuple[int, str]] = []
    ran = [0]
    with world(backend) as w:

        @rp.property_settings(n)
        @given(sc=rp.scenarios())
        def prop(sc: rp.Scenario) -> None:
            ran[0] += 1
            rp.load(w, sc)
            try:
                rp.check_scenario(lambda p: rp.CoreProbe(w, p), sc)
            except AssertionError as e:
                caught.append((ran[0], str(e).splitlines()[0][:160] if str(e) else "assert"))
            except rp.NotFound as e:
                caught.append((ran[0], f"NotFound: {e}"))

        prop()
    first = caught[0] if caught else (None, "")
    return ran[0], len(caught), first[0], first[1]


def pytest_configure(config: Any) -> None:
    """As a pytest plugin (-p bench.property_mutants): plant $SULI_MUTANT for the whole run."""
    name = os.environ.get("SULI_MUTANT")
    if name:
        for obj, attr, value in MUTANTS[name]():
            setattr(obj, attr, value)


def run_pytest(backend: str, mutant: str) -> str:
    """The real CI test, in a child process with the mutant planted by this module's hook."""
    module = {"embedded": "test_embedded.py", "opensearch": "test_opensearch.py"}[backend]
    cmd = [sys.executable, "-m", "pytest", f"tests/contract/{module}", "-q", "-x", "-k"]
    cmd += ["any_path", "-p", "no:cacheprovider", "-p", "bench.property_mutants"]
    done = subprocess.run(
        cmd, cwd=REPO, env={**os.environ, "SULI_MUTANT": mutant}, capture_output=True, text=True
    )
    lines = [ln for ln in done.stdout.splitlines() if ln.strip()]
    return f"pytest exit {done.returncode}: " + " | ".join(lines[-1:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--backend", choices=["embedded", "opensearch", "both"], default="both")
    ap.add_argument("--pytest", action="store_true", help="also run the real test per mutant")
    ap.add_argument("--only", help="one mutant by name")
    args = ap.parse_args()
    backends = ["embedded", "opensearch"] if args.backend == "both" else [args.backend]
    missed = 0
    for backend in backends:
        t0 = time.perf_counter()
        ran, hits, _, _ = count(backend)
        print(
            f"[{backend}] no mutant: {hits} of {ran} examples fail ({time.perf_counter() - t0:.0f}s)"
        )
        missed += hits
        for name, make in MUTANTS.items():
            if args.only and name != args.only:
                continue
            t0 = time.perf_counter()
            with planted(make()):
                ran, hits, first, msg = count(backend)
                line = (
                    f"[{backend}] {name}: caught in {hits} of {ran} examples"
                    f" (first at example {first}: {msg})"
                    if hits
                    else f"[{backend}] {name}: NOT caught in {ran} examples"
                )
                print(f"{line} ({time.perf_counter() - t0:.0f}s)", flush=True)
                if args.pytest:
                    print(f"    {run_pytest(backend, name)}", flush=True)
            missed += 0 if hits else 1
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
