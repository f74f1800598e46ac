"""`suli index --workers N`: worker processes embed, the main process writes and accounts.

The same vectors as one process; a worker killed mid-run stops the run loudly with every line
accounted for (written, rejected or reported as not written), never a silent loss.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from indexer.workers import EmbedPool
from suli.backends.embedded import EmbeddedBackend
from suli.embedding import FakeEmbedder
from suli.visibility import Visibility

SULI = str(Path(sys.executable).parent / "suli")


def line(k: int) -> bytes:
    item = {"id": f"itm_{k}", "workspace": "ws", "title": f"note {k}", "body": f"text {k % 17}"}
    return (json.dumps(item) + "\n").encode()


def env_for(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SULI_")}
    return {**env, "SULI_EMBEDDER": "fake", "SULI_HOME": str(tmp_path), "SULI_BACKEND": "embedded"}


def test_a_pool_gives_the_vectors_one_process_gives() -> None:
    texts = [f"passage {k} about {'x' * (k % 7)} things" for k in range(40)]
    pool = EmbedPool("fake", 2)
    try:
        futures = [pool.submit(texts[k : k + 8]) for k in range(0, 40, 8)]
        got = np.vstack([EmbedPool.result(f) for f in futures])
    finally:
        pool.close()
    assert np.array_equal(got, FakeEmbedder().embed_documents(texts))


def test_workers_index_what_one_process_indexes(tmp_path: Path) -> None:
    src = tmp_path / "items.jsonl"
    src.write_bytes(b"".join(line(k) for k in range(300)))
    env = env_for(tmp_path)
    for workers in ("0", "2"):
        env["SULI_EMBEDDED_PATH"] = str(tmp_path / f"w{workers}.db")
        # A cache of its own per run: the second run must embed, not read the first's vectors.
        env["SULI_VECTOR_CACHE"] = str(tmp_path / f"w{workers}.sqlite")
        out = subprocess.run(
            [SULI, "index", "--json", "--workers", workers, str(src)],
            env=env, capture_output=True, check=True,
        )  # fmt: skip
        body = json.loads(out.stdout)
        assert (body["indexed"], body["embedded"], body["stopped"]) == (300, 300, None)
    one, two = (EmbeddedBackend(tmp_path / f"w{w}.db", 384) for w in ("0", "2"))
    keys = [("ws", f"itm_{k}") for k in range(300)]
    assert (
        one.stored_hashes(keys) == two.stored_hashes(keys) and len(one.stored_hashes(keys)) == 300
    )
    reader = Visibility(workspace="ws", principal_id="prn_reader", boards=frozenset())
    ids = [k for _, k in keys]
    a, b = one.vectors(reader, ids), two.vectors(reader, ids)
    assert a.keys() == b.keys() == set(ids)
    assert all(np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in ids)


def cache_rows(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT count(*) FROM vectors").fetchone()[0])


@pytest.mark.parametrize("workers", ["0", "2"])
def test_workers_fill_and_read_the_vector_cache_and_the_summary_tells_them_apart(
    tmp_path: Path, workers: str
) -> None:
    src = tmp_path / "items.jsonl"
    src.write_bytes(b"".join(line(k) for k in range(16)))
    env = env_for(tmp_path)
    cache = tmp_path / "cache.sqlite"
    env["SULI_VECTOR_CACHE"] = str(cache)

    def run(store: str) -> dict[str, object]:
        env["SULI_EMBEDDED_PATH"] = str(tmp_path / store)
        out = subprocess.run(
            [SULI, "index", "--json", "--workers", workers, str(src)],
            env=env, capture_output=True, check=True,
        )  # fmt: skip
        return json.loads(out.stdout)  # type: ignore[no-any-return]

    first = run("a.db")  # a new store, an empty cache: the model embeds every item
    assert (first["indexed"], first["embedded"], first["cached"], first["reused"]) == (16, 16, 0, 0)
    assert cache_rows(cache) == 16
    again = run("a.db")  # the same store: every stored vector is reused (hash unchanged)
    assert (again["indexed"], again["embedded"], again["cached"], again["reused"]) == (16, 0, 0, 16)
    other = run("b.db")  # another store: the vectors come from the cache, not the model
    assert (other["indexed"], other["embedded"], other["cached"], other["reused"]) == (16, 0, 16, 0)
    assert cache_rows(cache) == 16
    a, b = (EmbeddedBackend(tmp_path / s, 384) for s in ("a.db", "b.db"))
    reader = Visibility(workspace="ws", principal_id="prn_reader", boards=frozenset())
    ids = [f"itm_{k}" for k in range(16)]
    va, vb = a.vectors(reader, ids), b.vectors(reader, ids)
    assert all(np.array_equal(np.asarray(va[k]), np.asarray(vb[k])) for k in ids)


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        kids = (task / "children").read_text().split()
        found.extend(int(k) for k in kids)
    return found


def test_a_killed_worker_stops_the_run_loudly_and_loses_no_line(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    env["SULI_EMBEDDED_PATH"] = str(tmp_path / "suli.db")
    proc = subprocess.Popen(
        [SULI, "index", "--json", "--workers", "2", "-"],
        env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdin is not None
    proc.stdin.write(b"".join(line(k) for k in range(200)))
    proc.stdin.flush()
    deadline = time.monotonic() + 60
    workers: list[int] = []
    while time.monotonic() < deadline:  # the spawned workers (beside a resource tracker)
        workers = [c for c in _children(proc.pid) if b"spawn_main" in _cmdline(c)]
        if workers:
            break
        time.sleep(0.1)
    assert workers, "no worker process appeared"
    os.kill(workers[0], signal.SIGKILL)
    try:
        for k in range(200, 2000):
            proc.stdin.write(line(k))
        proc.stdin.close()
    except BrokenPipeError:
        pass  # the run stopped while we were still feeding it: that is the point
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err.decode()
    body = json.loads(out)
    assert body["stopped"] and "worker process died" in body["stopped"]
    # every line read is accounted for: written, rejected, or reported as not written
    assert body["indexed"] + body["rejected"] + body["unwritten"] == body["read"]
    store = EmbeddedBackend(tmp_path / "suli.db", 384)
    assert store.count() == body["indexed"]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
