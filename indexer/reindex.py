"""`suli reindex`: build a new physical index, copy, catch up, verify, swap the alias; roll back.

    plan      source = the alias's index; re-embed when the model or its dimension changed
    create    target `<alias>-v<mapping>-<stamp>`, refresh off while copying
    copy      a point-in-time snapshot sorted by id (resumable), or server-side `_reindex`
    merge     with --merge: force-merge the target to MERGE_SEGMENTS per shard (a task)
    catch up  documents written since the snapshot, found per shard by `_seq_no`
    switch    write-block the source (in-flight writes finish first), last catch-up, remove
              ids deleted meanwhile, verify, one `_aliases` call (remove + add); writers the
              block refused re-send and land in the new index; the source stays for rollback
State lives in the target's mapping `_meta.reindex`, so `--resume` works from any machine.
docs/operations.md says why it works this way.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import mappings
from indexer import copying as cp
from indexer.inventory import call, fields, live_index, physical_indices, read_meta, write_meta
from indexer.switch import ProgressFn, Report, Switcher
from suli.backends.opensearch import OpenSearchBackend, keys
from suli.embedding import Embedder
from suli.errors import BackendUnavailable, IndexingError, InvalidInput, NotFound

UNFINISHED = ("copying", "copied", "failed")
SAVE_EVERY_S = 5.0  # how often the copy cursor is saved; a resume re-copies at most this much
# A bulk-loaded index has dozens of segments and Lucene searches each one's HNSW graph on its
# own; one per shard made the vector leg 77 -> 35 ms at 100k (bench/RESULTS-archive.md section 4).
MERGE_SEGMENTS = 1


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _live_since(previous: str, marks: cp.Checkpoints) -> dict[str, Any]:
    """Recorded on the index that goes live: where it came from, and its marks at the swap."""
    return {"previous": previous, "checkpoints": marks, "at": _now()}


@dataclass(frozen=True)
class Plan:
    """What a reindex will do; `--dry-run` prints it and stops."""

    alias: str
    source: str
    target: str | None  # None: created when the run starts; set when resuming
    source_mapping_version: int | None
    source_model: str
    source_dimension: int | None
    mapping_version: int
    model: str
    dimension: int
    shards: int
    replicas: int
    docs: int
    re_embed: bool
    method: str  # "scan" (point in time + search_after) or "server" (_reindex)
    reasons: tuple[str, ...]
    merge: bool = False  # force-merge the target to MERGE_SEGMENTS per shard before the swap

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RollbackPlan:
    alias: str
    current: str
    previous: str
    since: cp.Checkpoints
    written_since_swap: int
    mode: str  # "copy" vectors, "re-embed" with this model, or "skip" (another model)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class Reindexer(Switcher):
    """Reindexes the alias of `backend` with the mapping in mappings/ and `embedder`."""

    def __init__(
        self,
        backend: OpenSearchBackend,
        embedder: Embedder,
        rejects_dir: Path,
        *,
        on_progress: ProgressFn | None = None,
        page: int = cp.PAGE,
        sample: int = 200,
        max_passes: int = 5,
    ) -> None:
        super().__init__(
            backend,
            embedder,
            rejects_dir,
            on_progress=on_progress,
            sample=sample,
            max_passes=max_passes,
        )
        self.page = page

    # ---- planning ----------------------------------------------------------------------

    def _live(self) -> str:
        source = live_index(self.client, self.alias)
        if source is None:
            raise NotFound(f"no index behind alias {self.alias}: run `suli index FILE` first")
        return source

    def plan(
        self,
        *,
        shards: int | None = None,
        replicas: int | None = None,
        re_embed: bool = False,
        method: str = "auto",
        resume: bool = False,
        merge: bool = False,
    ) -> Plan:
        """Decide target shape, copy method and whether vectors are made again."""
        source = self._live()
        unfinished = [
            p
            for p in physical_indices(self.client, self.alias)
            if p.reindex and p.reindex.get("phase") in UNFINISHED and not p.live
        ]
        target = None
        if resume:
            if not unfinished:
                raise InvalidInput(f"resume: no interrupted reindex of {self.alias}", "resume")
            last = unfinished[-1]
            state = last.reindex or {}
            if state.get("source") != source:
                raise InvalidInput(
                    f"resume: {last.name} was copied from {state.get('source')}, but "
                    f"{self.alias} now points at {source}; `suli indices drop {last.name}`",
                    "resume",
                )
            target, re_embed, method = last.name, bool(state["re_embed"]), str(state["method"])
            shards, replicas = last.shards, last.replicas
        elif unfinished:
            raise InvalidInput(
                f"resume: an interrupted reindex into {unfinished[-1].name} exists; run "
                f"`suli reindex --resume` or `suli indices drop {unfinished[-1].name}`",
                "resume",
            )
        meta = read_meta(self.client, source)
        src_model, src_dim = str(meta.get("model") or ""), meta.get("dimension")
        reasons = ["asked for (--re-embed)"] if re_embed else []
        if src_model != self.embedder.name:
            reasons.append(f"model changes: {src_model or 'unknown'} -> {self.embedder.name}")
        if src_dim != self.embedder.dimension:
            reasons.append(f"dimension changes: {src_dim} -> {self.embedder.dimension}")
        re_embed = bool(reasons)
        server_ok = not re_embed and fields(self.client, source) <= mappings.item_fields()
        if method == "server" and not server_ok:
            raise InvalidInput(
                "method: server-side _reindex copies stored vectors and fields as they are; "
                "it cannot re-embed or drop fields the new mapping lacks (use --method scan)",
                "method",
            )
        chosen = "server" if method == "server" or (method == "auto" and server_ok) else "scan"
        settings = self.backend.settings
        return Plan(
            alias=self.alias,
            source=source,
            target=target,
            source_mapping_version=meta.get("mapping_version"),
            source_model=src_model,
            source_dimension=src_dim,
            mapping_version=mappings.mapping_version(),
            model=self.embedder.name,
            dimension=self.embedder.dimension,
            shards=shards or settings.shards,
            replicas=settings.replicas if replicas is None else replicas,
            docs=cp.count(self.client, source),
            re_embed=re_embed,
            method=chosen,
            reasons=tuple(reasons) or ("same model and dimension",),
            merge=merge,
        )

    # ---- the run -----------------------------------------------------------------------

    def run(self, plan: Plan) -> Report:
        """Create (or resume) the target, copy, catch up, verify and swap; returns the figures."""
        converter = cp.Converter(self.embedder if plan.re_embed else None)
        if plan.target is None:
            target = self.backend.create_physical(plan.shards, plan.replicas)
            # No refresh while copying: fewer, larger segments, so far fewer HNSW merges.
            self._settings(target, {"index.refresh_interval": "-1"})
            since = cp.checkpoints(self.client, plan.source)  # read before the refresh
            cp.refresh(self.client, plan.source)
            state: dict[str, Any] = {
                "source": plan.source,
                "since": since,
                "method": plan.method,
                "re_embed": plan.re_embed,
                "phase": "copying",
                "cursor": None,
                "copied": 0,
                "task": None,
                "started_at": _now(),
            }
            self._save(target, state)
        else:
            target = plan.target
            state = read_meta(self.client, target)["reindex"]
        report = Report(plan.alias, plan.source, target, plan.method, plan.re_embed)
        if state["phase"] in ("copying", "failed"):
            started = time.monotonic()
            state["phase"] = "copying"
            if plan.method == "server":
                self._copy_server(plan, target, state)
            else:
                self._copy_scan(plan, target, state, converter, report)
            report.copy_seconds = time.monotonic() - started
            state["phase"] = "copied"
            self._save(target, state)
        report.copied = int(state["copied"])
        refresh_interval = mappings.items_index(1)["settings"]["index"]["refresh_interval"]
        self._settings(target, {"index.refresh_interval": refresh_interval})
        self._wait_ready(target, report)
        if plan.merge:  # before the switch: writes are never held while segments merge
            self._merge(target, report)

        def record(marks: cp.Checkpoints) -> None:  # before the swap: a crash after it is known
            self._save(target, state, live_since=_live_since(plan.source, marks))

        self.switch(plan.source, target, state["since"], converter, report, plan.dimension, record)
        state["phase"] = "swapped"
        self._save(target, state)
        return report

    def _copy_scan(
        self,
        plan: Plan,
        target: str,
        state: dict[str, Any],
        converter: cp.Converter,
        report: Report,
    ) -> None:
        """Copy a point-in-time snapshot page by page; the cursor (last id) is saved as we go."""
        opened = call(
            lambda: self.client.create_pit(index=plan.source, params={"keep_alive": cp.KEEP_ALIVE}),
            "point in time",
        )
        pit = opened["pit_id"]
        rejected: dict[str, str] = {}
        saved = time.monotonic()
        try:
            for hits in cp.pages(self.client, pit=pit, after=state["cursor"], size=self.page):
                done = cp.write(
                    self.backend, target, converter.convert([h["_source"] for h in hits])
                )
                rejected.update(done.rejected)
                report.retries += done.retries
                state["cursor"] = [str(v) for v in hits[-1]["sort"]]
                state["copied"] = int(state["copied"]) + done.written
                self.progress("copy", state["copied"], plan.docs)
                if time.monotonic() - saved > SAVE_EVERY_S:
                    self._save(target, state)
                    saved = time.monotonic()
        finally:
            self._save(target, state)
            # It expires by itself; a failed delete must not hide the error that got us here.
            with contextlib.suppress(Exception):
                self.client.delete_pit(body={"pit_id": [pit]})
        if rejected:
            report.rejects_file = self._write_rejects(target, rejected)
            state["phase"] = "failed"
            self._save(target, state)
            raise IndexingError(
                f"{len(rejected)} items could not be written to {target} (reasons in "
                f"{report.rejects_file}); nothing was swapped, {self.alias} still points at "
                f"{plan.source}"
            )

    def _copy_server(self, plan: Plan, target: str, state: dict[str, Any]) -> None:
        """Server-side `_reindex` as a task; a resumed run follows the same task if it lives."""
        task = str(state.get("task") or "")
        if not task or self._task(task) is None:
            started = call(
                lambda: self.client.reindex(
                    body={
                        "source": {"index": plan.source, "size": 1000},
                        "dest": {"index": target},
                        # Storage keys from the fields, whatever `_id` the source used
                        # (bare ids before mapping v4): see suli.backends.opensearch.keys.
                        "script": {
                            "lang": "painless",
                            "source": "ctx._id = ctx._source.workspace + params.sep + ctx._source.id",
                            "params": {"sep": keys.SEP},
                        },
                    },
                    params={"wait_for_completion": "false", "slices": "auto", "refresh": "false"},
                ),
                "_reindex",
            )
            state["task"] = task = started["task"]
            self._save(target, state)
        while True:
            status = self._task(task)
            if status is None:
                raise BackendUnavailable(
                    f"reindex task {task} vanished; run `suli reindex --resume`"
                )
            st = status["task"]["status"]
            state["copied"] = int(st.get("created", 0)) + int(st.get("updated", 0))
            self.progress("copy", state["copied"], int(st.get("total") or plan.docs))
            if status.get("completed"):
                response = status.get("response") or {}
                failures = response.get("failures") or []
                if status.get("error") or failures:
                    state["phase"] = "failed"
                    self._save(target, state)
                    why = status.get("error") or failures[:3]
                    raise IndexingError(f"_reindex into {target} failed: {why}")
                return
            time.sleep(1.0)

    def _merge(self, target: str, report: Report) -> None:
        """Force-merge the target as a task; progress counts the shard copies already merged.

        A failure leaves the target in phase "copied": nothing is swapped, `--resume` goes on.
        """
        started = time.monotonic()
        opened = call(
            lambda: self.client.indices.forcemerge(
                index=target,
                params={"max_num_segments": MERGE_SEGMENTS, "wait_for_completion": "false"},
            ),
            "force merge",
        )
        task = str(opened["task"])
        while True:
            status = self._task(task)
            self.progress("merge", *self._merged_copies(target))
            if status is None:
                raise BackendUnavailable(
                    f"force-merge task {task} vanished; nothing was swapped, run "
                    "`suli reindex --resume` (with --merge to merge again)"
                )
            if status.get("completed"):
                failed = ((status.get("response") or {}).get("_shards") or {}).get("failed")
                if status.get("error") or failed:
                    why = status.get("error") or f"{failed} shard(s) failed"
                    raise IndexingError(
                        f"force merge of {target} failed: {why}; nothing was swapped, "
                        f"{self.alias} still points at its index (`suli reindex --resume`)"
                    )
                break
            time.sleep(1.0)
        report.merge_seconds = round(time.monotonic() - started, 1)
        cp.refresh(self.client, target)
        report.segments = max(self._segments(target), default=0)

    def _segments(self, target: str) -> list[int]:
        """Searchable segments of each shard copy (primaries and replicas) of the target."""
        body = call(lambda: self.client.indices.segments(index=target), "segments")
        shards = body["indices"][target]["shards"].values()
        return [int(copy.get("num_search_segments", 0)) for copies in shards for copy in copies]

    def _merged_copies(self, target: str) -> tuple[int, int]:
        """(shard copies at MERGE_SEGMENTS or fewer, all shard copies): the merge's progress."""
        counts = self._segments(target)
        return sum(n <= MERGE_SEGMENTS for n in counts), len(counts)

    def _task(self, task: str) -> dict[str, Any] | None:
        try:
            return dict(self.client.tasks.get(task_id=task))
        except Exception:  # unknown (its node died): start again; the copy is idempotent
            return None

    # ---- the switch --------------------------------------------------------------------

    def plan_rollback(self) -> RollbackPlan:
        """The index that was live before the current one, and what was written since."""
        current = self._live()
        meta = read_meta(self.client, current)
        came_from = meta.get("live_since") or {}
        previous = came_from.get("previous")
        if not previous:
            raise NotFound(f"{current} records no previous index: nothing to roll back to")
        if not call(lambda: self.client.indices.exists(index=previous), "index check"):
            raise NotFound(f"the previous index {previous} is gone (dropped?): cannot roll back")
        before = read_meta(self.client, previous)
        since = {str(k): int(v) for k, v in came_from["checkpoints"].items()}
        written = cp.count_since(self.client, current, since)
        same = (before.get("model"), before.get("dimension")) == (
            meta.get("model"),
            meta.get("dimension"),
        )
        if same:
            mode = "copy"
        elif (before.get("model"), before.get("dimension")) == (
            self.embedder.name,
            self.embedder.dimension,
        ):
            mode = "re-embed"
        else:
            mode = "skip"
        return RollbackPlan(self.alias, current, previous, since, written, mode)

    def rollback(self, plan: RollbackPlan, force: bool = False) -> Report:
        """Point the alias back at the previous index, carrying over writes made since the swap."""
        if plan.mode == "skip" and plan.written_since_swap and not force:
            raise InvalidInput(
                f"force: {plan.written_since_swap} items were written to {plan.current} since "
                f"the swap and {plan.previous} holds another model's vectors; set the embedder "
                "to that model to carry them over, or pass --force to roll back without them",
                "force",
            )
        converter = cp.Converter(None if plan.mode == "copy" else self.embedder)
        report = Report(
            plan.alias, plan.current, plan.previous, "rollback", plan.mode == "re-embed"
        )
        self._settings(plan.previous, {"index.blocks.write": False})
        dimension = int(read_meta(self.client, plan.previous).get("dimension") or 0)

        def record(marks: cp.Checkpoints) -> None:  # a second rollback comes back here
            meta = read_meta(self.client, plan.previous)
            meta["live_since"] = _live_since(plan.current, marks)
            write_meta(self.client, plan.previous, meta)

        self.switch(
            plan.current, plan.previous, plan.since, converter, report, dimension, record,
            catch_up=plan.mode != "skip",
        )  # fmt: skip
        if plan.mode == "skip" and plan.written_since_swap:
            report.notes.append(
                f"{plan.written_since_swap} items written since the swap were left out"
            )
        return report

    # ---- helpers -----------------------------------------------------------------------

    def _save(self, target: str, state: dict[str, Any], **extra: Any) -> None:
        meta = read_meta(self.client, target)
        meta["reindex"] = state
        meta.update(extra)
        write_meta(self.client, target, meta)
