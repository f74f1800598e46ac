"""The switch of a reindex or rollback: catch up, reconcile, write-block, verify, swap the alias.

    catch up   documents written to the source since the marks, found per shard by `_seq_no`
    reconcile  when counts differ: copy ids the target lacks, delete ids the source lost
    block      `add_block` write on the source (returns once in-flight writes are done)
    last pass  catch up and reconcile again, now that nothing moves, then verify
    swap       one `_aliases` call (remove + add); the source stays, write-blocked
Writers the block refuses re-send (suli.backends.opensearch treats the block as transient)
and land, through the alias, in the new index.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from indexer import copying as cp
from indexer.inventory import call
from suli.backends.opensearch import OpenSearchBackend
from suli.embedding import Embedder
from suli.errors import BackendUnavailable, IndexingError

ProgressFn = Callable[[str, int, int | None], None]  # phase, done, total (None: unknown)
SETTLED = 50  # a catch-up pass that copies no more than this lets the write block begin
FINAL_PASSES = 20  # under the block writes settle in one or two passes; more means trouble


@contextlib.contextmanager
def _timed(steps: dict[str, float], name: str) -> Iterator[None]:
    t0 = time.perf_counter()
    try:
        yield
    finally:
        steps[name] = round(steps.get(name, 0.0) + (time.perf_counter() - t0) * 1000, 1)


@dataclass
class Report:
    """What a run did, with the figures ops ask for."""

    alias: str
    source: str
    target: str
    method: str
    re_embed: bool
    copied: int = 0
    copy_seconds: float = 0.0
    passes: int = 0
    caught_up: int = 0
    deleted: int = 0
    retries: int = 0
    blocked_ms: float = 0.0  # writes to the alias were held (and re-sent) this long
    swap_ms: float = 0.0  # the one _aliases call
    merge_seconds: float | None = None  # `--merge`: the force-merge before the swap took this
    segments: int | None = None  # `--merge`: most segments a shard copy has after it
    verification: dict[str, Any] = field(default_factory=dict)
    rejects_file: str | None = None
    notes: list[str] = field(default_factory=list)
    steps_ms: dict[str, float] = field(default_factory=dict)  # time of each switch step
    marks: cp.Checkpoints = field(default_factory=dict)  # source marks after the last pass

    @property
    def items_per_s(self) -> float:
        return self.copied / self.copy_seconds if self.copy_seconds else 0.0

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "items_per_s": round(self.items_per_s, 1)}


class Switcher:
    """Moves the alias from one physical index to another without losing a write."""

    def __init__(
        self,
        backend: OpenSearchBackend,
        embedder: Embedder,
        rejects_dir: Path,
        *,
        on_progress: ProgressFn | None = None,
        sample: int = 200,
        max_passes: int = 5,
    ) -> None:
        self.backend = backend
        self.client = backend.client
        self.alias = backend.alias
        self.embedder = embedder
        self.rejects_dir = rejects_dir
        self.progress = on_progress or (lambda phase, done, total: None)
        self.sample = sample
        self.max_passes = max_passes

    def switch(
        self,
        source: str,
        target: str,
        since: cp.Checkpoints,
        converter: cp.Converter,
        report: Report,
        dimension: int,
        record: Callable[[cp.Checkpoints], None],
        catch_up: bool = True,
    ) -> None:
        """Catch up and reconcile, block writes on source, do it once more, verify, swap.

        Everything that can run before the block does, so writers wait as briefly as possible.
        """
        steps = report.steps_ms
        rejected: dict[str, str] = {}
        if catch_up:
            with _timed(steps, "catch_up"):
                for _ in range(self.max_passes):
                    if self._pass(source, target, since, converter, report, rejected) <= SETTLED:
                        break
                    since = report.marks
            with _timed(steps, "reconcile"):
                self._reconcile(source, target, converter, report, rejected)
            since = report.marks
            with _timed(steps, "sample"):  # the heavy reads, while writes still flow
                sampled, suspects = cp.sample_check(
                    self.client, source, target, dimension, converter,
                    size=self.sample, seed=int(time.time()), embed_check=self._embed_check,
                )  # fmt: skip
        # The target's marks, taken before our last writes to it: every write after the swap
        # lies above them, which is all a rollback needs (it skips documents it already has).
        record(cp.checkpoints(self.client, target))
        self.progress("block", 0, None)
        blocked_at = time.monotonic()
        swapped = False
        try:
            # add_block returns once writes already running on the source's shards are done.
            with _timed(steps, "add_block"):
                call(lambda: self.client.indices.add_block(index=source, block="write"), "block")
            if catch_up:
                with _timed(steps, "final_catch_up"):
                    # Until a pass finds the marks unmoved and no write in flight on any shard.
                    for _ in range(FINAL_PASSES):
                        self._pass(source, target, since, converter, report, rejected)
                        if report.marks == since and cp.settled(self.client, source):
                            break
                        since = report.marks
                    else:
                        raise BackendUnavailable(
                            f"writes to {source} did not settle under the block"
                        )
                with _timed(steps, "final_reconcile"):
                    self._reconcile(source, target, converter, report, rejected)
                self.progress("verify", 0, None)
                with _timed(steps, "verify"):
                    # Counts must match exactly now that the source is still; sampled items
                    # that differed may have been written meanwhile: they must match now.
                    src_docs, tgt_docs = (cp.count(self.client, i) for i in (source, target))
                    problems: dict[str, str] = {}
                    if suspects:
                        _, problems = cp.sample_check(
                            self.client, source, target, dimension, converter,
                            ids=list(suspects), embed_check=self._embed_check,
                        )  # fmt: skip
                lines = [f"{i}: {p}" for i, p in problems.items()]
                if src_docs != tgt_docs:
                    lines.insert(0, f"doc counts differ: {source} {src_docs}, {target} {tgt_docs}")
                check = cp.Verification(src_docs, tgt_docs, sampled, lines[:20])
                report.verification = asdict(check)
                if rejected:
                    report.rejects_file = self._write_rejects(target, rejected)
                if rejected or not check.ok:
                    why = "; ".join(check.problems[:3]) or f"rejects in {report.rejects_file}"
                    raise IndexingError(
                        f"verification of {target} failed ({why}); nothing was swapped, "
                        f"{self.alias} still points at {source}"
                    )
            actions = [
                {"remove": {"index": source, "alias": self.alias}},
                {"add": {"index": target, "alias": self.alias}},
            ]
            with _timed(steps, "swap"):
                call(lambda: self.client.indices.update_aliases(body={"actions": actions}), "swap")
            report.swap_ms = steps["swap"]
            swapped = True
        finally:
            if not swapped:
                self._settings(source, {"index.blocks.write": False})
        report.blocked_ms = round((time.monotonic() - blocked_at) * 1000, 1)
        self.progress("swapped", 1, 1)

    def _pass(
        self,
        source: str,
        target: str,
        since: cp.Checkpoints,
        converter: cp.Converter,
        report: Report,
        rejected: dict[str, str],
    ) -> int:
        """One catch-up pass from since; the new marks go to report.marks. Returns items written."""
        done, report.marks = cp.catch_up(
            self.client, self.backend, converter, source, target, since
        )
        report.passes += 1
        report.caught_up += done.written
        report.retries += done.retries
        rejected.update(done.rejected)
        self.progress("catch-up", report.caught_up, None)
        return done.written

    def _reconcile(
        self,
        source: str,
        target: str,
        converter: cp.Converter,
        report: Report,
        rejected: dict[str, str],
    ) -> None:
        """When counts differ: copy ids the target lacks, delete ids the source no longer has."""
        cp.refresh(self.client, source, target)
        if cp.count(self.client, source) == cp.count(self.client, target):
            return
        missing, extra = cp.id_diff(self.client, source, target)
        docs = list(cp.fetch(self.client, source, missing).values())
        fixed = cp.write(self.backend, target, converter.convert(docs))
        rejected.update(fixed.rejected)
        report.caught_up += fixed.written
        cp.delete_ids(self.client, target, extra)
        report.deleted += len(extra)

    def _embed_check(self, items: list[Any]) -> list[Any]:
        return list(self.embedder.embed_documents([it.embed_text() for it in items]))

    # ---- rollback ----------------------------------------------------------------------
    def _settings(self, index: str, body: dict[str, Any]) -> None:
        call(lambda: self.client.indices.put_settings(index=index, body=body), "index settings")

    def _wait_ready(self, target: str, report: Report) -> None:
        """Green before the swap; yellow (replicas not placeable) is accepted with a note."""
        health = call(
            lambda: self.client.cluster.health(
                index=target,
                params={"wait_for_status": "green", "timeout": "60s", "request_timeout": 75},
            ),
            "index health",
        )
        if health.get("status") == "green":
            return
        if health.get("status") == "yellow":
            report.notes.append(f"{target} is yellow: some replicas are not assigned")
            return
        raise BackendUnavailable(f"{target} is {health.get('status')}: primaries not assigned")

    def _write_rejects(self, target: str, rejected: dict[str, str]) -> str:
        self.rejects_dir.mkdir(parents=True, exist_ok=True)
        path = self.rejects_dir / f"reindex-{target}.jsonl"
        with path.open("w", encoding="utf-8") as f:
            for item_id, reason in sorted(rejected.items()):
                f.write(json.dumps({"id": item_id, "reason": reason}) + "\n")
        return str(path)
