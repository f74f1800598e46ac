"""The search core's own CPU per search, apart from the engine: answers recorded once, replayed.

On an index the scale bench loaded, each query's first page goes through `Searcher.search` once
against the nodes, and every answer the client's connections return (status, headers and the
raw body text) is kept in order. Then --rounds rounds replay the same searches with the
connections answering from that tape instead of the network: everything of Suli and of
opensearch-py runs as it does in production (bodies built and serialised, answers parsed,
fusion, ranking, gates, the page filled and rendered), only the socket is gone. What is
measured is the process's CPU time per search (`time.process_time`, all threads), so another
process on the machine slows it little, and the engine's own work is not in it at all.

A replayed search must send the requests it recorded, as many and to the same method and
path (their bodies carry the deadline's timeout, so they are not compared): a change that sends
other requests stops the bench, since its tape would answer the wrong question; each replayed
first page must also be the recorded one. --profile prints cProfile's top functions over one
more round.

Run from the repo root (a tree of another commit runs its own copy of this file for an A/B):
  .venv/bin/python -m bench.core_cpu --url http://127.0.0.1:9241 [--n 100000] [--queries 200]
      [--rounds 5] [--profile] [--out bench/results/core_cpu_X.json]
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench.overhead import profiled
from bench.replay import loaded_run, report
from suli.models import SearchRequest

Sent = tuple[str, str]  # method and path: what a replayed request must repeat


class Tape:
    """Stands in for the client's connections: records their answers, then replays them."""

    def __init__(self, client: Any) -> None:
        self.kept: dict[str, list[tuple[Sent, Any]]] = {}
        self.query = ""
        self.at = 0
        self.replaying = False
        for conn in client.transport.connection_pool.connections:
            conn.perform_request = self._through(conn.perform_request)

    def _through(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def perform(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            if not self.replaying:
                answer = real(method, url, *args, **kwargs)
                self.kept.setdefault(self.query, []).append(((method, url), answer))
                return answer
            tape = self.kept[self.query]
            if self.at >= len(tape) or tape[self.at][0] != (method, url):
                raise SystemExit(
                    f"replay of {self.query!r} sent {method} {url}, not what it recorded"
                )
            self.at += 1
            return tape[self.at - 1][1]

        return perform

    def replay(self) -> None:
        """From now on the connections answer from the tape."""
        self.query, self.at, self.replaying = "", 0, True

    def on(self, query: str) -> None:
        """The next requests are this query's; the last query's tape must have been used up."""
        if self.replaying and self.query and self.at != len(self.kept[self.query]):
            sent = [f"{m} {u}" for (m, u), _ in self.kept[self.query]]
            raise SystemExit(
                f"replay of {self.query!r} sent {self.at} of the requests it recorded: {sent}"
            )
        self.query, self.at = query, 0


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    def more(ap: Any) -> None:
        ap.add_argument("--profile", action="store_true", help="cProfile one more round")

    args, run = loaded_run(__doc__, argv, more)
    load_before = os.getloadavg()
    texts = list(dict.fromkeys(run.query_set[0]))  # a text asked twice is taped once
    searcher, principal = run.searcher, run.principal
    tape = Tape(run.backend.client)

    def one(q: str) -> Any:
        tape.on(q)
        return searcher.search(principal, SearchRequest(query=q, limit=10))

    one(texts[0])  # what a first search reads once (e.g. the index's mapping) stays untaped
    tape.kept.clear()
    recorded = {q: one(q) for q in texts}  # against the nodes: the tape
    tape.replay()
    for q in texts:  # the answers replayed are the answers recorded
        again = one(q)
        assert [r.id for r in again.results] == [r.id for r in recorded[q].results], q
    per_round: list[float] = []
    for _ in range(args.rounds):
        cpu = time.process_time()
        for q in texts:
            one(q)
        per_round.append(round((time.process_time() - cpu) * 1000 / len(texts), 3))
    got: dict[str, Any] = {
        "alias": run.alias,
        "queries": len(texts),
        "requests_per_search": round(sum(map(len, tape.kept.values())) / len(texts), 2),
        "rounds": args.rounds,
        "cpu_ms_per_search": per_round,
        "cpu_ms_median": statistics.median(per_round),
        "load_avg_before": [round(x, 2) for x in load_before],
        "load_avg_after": [round(x, 2) for x in os.getloadavg()],
    }
    if args.profile:
        orders = (("tottime", 25), ("cumtime", 40))
        made = profiled(lambda: [one(q) for q in texts], *orders)
        for (order, _), text in zip(orders, made, strict=True):
            got[f"profile_{order}"] = text.splitlines()
    tape.on("")  # the last replayed search used its tape up too
    return report("bench.core_cpu", args, argv, got)


if __name__ == "__main__":
    main()
