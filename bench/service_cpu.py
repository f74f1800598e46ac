"""CPU the query service spends per query: a real `suli serve` process under 16 clients.

Indexes --items synthetic items (bench.load's corpus, FakeEmbedder: nothing is embedded for
real) into a fresh uuid-named alias on the configured OpenSearch, starts `suli serve` over it as
a subprocess (the default log level, its request lines to a file), and drives it with --clients
concurrent httpx clients for --duration seconds per round over a fixed query set (plain GET
searches, POST searches with filters and explain, browses). Per round it reads the service
process's utime+stime from /proc/<pid>/stat before and after and reports CPU ms per query
answered, QPS and p50/p90 latency.

With --base DIR (a tree of another commit, e.g. `git archive <commit> | tar -x -C DIR`) a
second service runs from DIR over the same index, and rounds alternate A (DIR) / B (this tree):
both see the same load on the machine, and the ratio B/A is what to read. With --profile S the
last S seconds are sampled with py-spy (--gil: the thread holding the GIL, i.e. where the
service's Python CPU goes; a thread waiting on a socket is not sampled) and the top 20
functions by own samples and by samples including callees are printed (py-spy is not a
dependency: `.venv/bin/pip install py-spy`; its raw stacks are kept in --results-dir). With
--parts the pieces the issue names are first timed in-process, in CPU time (answers parsed by
the stdlib and by orjson, a body's finishing, one request log line).

Run from the repo root:
  .venv/bin/python -m bench.service_cpu [--items 5000] [--clients 16] [--duration 20]
      [--rounds 3] [--base DIR] [--profile 20] [--out bench/results/service_cpu_X.txt]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import io
import os
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any, TextIO

import httpx
from opensearchpy import OpenSearch

from bench.load import WORDS, build, pct, wait_ready
from suli.settings import Settings

TICKS = os.sysconf("SC_CLK_TCK")
REPO = Path(__file__).resolve().parent.parent


def cpu_s(pid: int) -> float:
    """utime + stime of a process (all its threads), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def query_set(n: int, seed: int) -> list[tuple[str, dict[str, Any]]]:
    """A fixed list of (method, params-or-body) search requests."""
    rng = random.Random(seed)
    out: list[tuple[str, dict[str, Any]]] = []
    for i in range(n):
        q = " ".join(rng.choices(WORDS, k=rng.randint(1, 3)))
        if i % 10 < 6:
            out.append(("GET", {"q": q}))
        elif i % 10 < 9:
            body = {"q": q, "outcome": ["approved", "completed"], "limit": 20, "explain": True}
            out.append(("POST", body))
        else:
            out.append(("GET", {"kind": "artifact"}))
    return out


def start_serve(
    tree: Path, settings: Settings, home: str, port: int, log_path: Path
) -> subprocess.Popen[bytes]:
    """`suli serve` from `tree` (its cli/app/suli packages first on the path)."""
    env = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "SULI_BACKEND": "opensearch",
        "SULI_OPENSEARCH_URL": str(settings.opensearch_url),
        "SULI_INDEX_ALIAS": settings.index_alias,
        "SULI_ACL_INDEX": settings.acl_index,
        "SULI_EMBEDDER": "fake",
        "SULI_HOME": home,
        "SULI_RATE_PER_MINUTE": "100000000",
        "SULI_RATE_PER_DAY": "1000000000",
    }
    cmd = [
        sys.executable, "-c", "import sys; from cli.main import cli; sys.exit(cli())",
        "serve", "--host", "127.0.0.1", "--port", str(port),
    ]  # fmt: skip
    log = open(log_path, "ab")  # noqa: SIM115 - the child owns it for its life
    return subprocess.Popen(cmd, env=env, cwd=tree, stdout=log, stderr=log)


async def _client(
    url: str,
    token: str,
    queries: list[tuple[str, dict[str, Any]]],
    start: int,
    stop_at: float,
    out: dict[str, Any],
) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    i = start
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
        while time.monotonic() < stop_at:
            method, data = queries[i % len(queries)]
            i += 1
            t0 = time.perf_counter()
            if method == "GET":
                r = await client.get("/api/v1/search", params=data)
            else:
                r = await client.post("/api/v1/search", json=data)
            ms = (time.perf_counter() - t0) * 1000
            out["lat"].append(ms)
            out["statuses"][r.status_code] += 1


async def drive(
    url: str,
    tokens: list[str],
    queries: list[tuple[str, dict[str, Any]]],
    clients: int,
    seconds: float,
) -> dict[str, Any]:
    out: dict[str, Any] = {"lat": [], "statuses": collections.Counter()}
    stop_at = time.monotonic() + seconds
    step = max(1, len(queries) // clients)
    await asyncio.gather(
        *(
            _client(url, tokens[i % len(tokens)], queries, i * step, stop_at, out)
            for i in range(clients)
        )
    )
    return out


def measure(
    url: str,
    pid: int,
    tokens: list[str],
    queries: list[tuple[str, dict[str, Any]]],
    clients: int,
    seconds: float,
) -> dict[str, Any]:
    c0, t0 = cpu_s(pid), time.monotonic()
    out = asyncio.run(drive(url, tokens, queries, clients, seconds))
    c1, t1 = cpu_s(pid), time.monotonic()
    n = len(out["lat"])
    ok = out["statuses"].get(200, 0)
    return {
        "queries": n,
        "ok": ok,
        "cpu_ms_per_query": (c1 - c0) * 1000 / max(ok, 1),
        "cpu_util": (c1 - c0) / (t1 - t0),
        "qps": ok / (t1 - t0),
        "p50": pct(out["lat"], 50),
        "p90": pct(out["lat"], 90),
        "statuses": dict(out["statuses"]),
    }


def py_spy_top(pid: int, seconds: float, folder: Path, label: str, top: int = 20) -> str:
    """py-spy's collapsed stacks of `seconds` of the process, as two top-N tables."""
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    raw = folder / f"pyspy-{label}.txt"
    subprocess.run(
        [exe, "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate", "200",
         "--format", "raw", "--output", str(raw), "--nonblocking", "--gil"],
        check=True, capture_output=True,
    )  # fmt: skip
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        frames = stack.split(";")
        frames = frames[1:] if frames and frames[0].startswith("process ") else frames
        frames = frames[1:] if frames and frames[0].startswith("thread ") else frames
        total += n
        if frames:
            own[frames[-1]] += n
        for f in set(frames):
            incl[f] += n
    lines = [f"py-spy {label}: {total} samples at 200/s over {seconds:g}s (GIL holder only)"]
    for title, table in (("own", own), ("including callees", incl)):
        lines.append(f"  top {top} by {title}:")
        for frame, n in table.most_common(top):
            lines.append(f"    {100 * n / max(total, 1):5.1f}%  {frame}")
    return "\n".join(lines)


def _cpu_us(fn: Any, items: list[Any], repeat: int = 5) -> float:
    """Median over `repeat` passes of process CPU microseconds per item of fn(item)."""
    per = []
    for _ in range(repeat):
        t = time.process_time()
        for x in items:
            fn(x)
        per.append((time.process_time() - t) * 1e6 / len(items))
    return statistics.median(per)


def parts(settings: Settings, tokens: list[str], queries: list[tuple[str, dict[str, Any]]]) -> str:
    """Costs of the pieces the issue names, in-process (CPU time, no other load on them): the
    engine's answers of the query set parsed by the stdlib and by orjson, the response body's
    finishing (rounding, size check) and one request log line through the service's formatter.
    The answers and bodies are recorded from the app run over the query set."""
    import json
    import logging

    import orjson
    from fastapi.testclient import TestClient

    from app import logs as app_logs
    from app import respond
    from app.main import create_app
    from suli.backends.opensearch import client as os_client

    answers: list[str] = []
    real = os_client.OrjsonSerializer.loads

    def recording(self: Any, s: str) -> Any:
        answers.append(s)
        return real(self, s)

    os_client.OrjsonSerializer.loads = recording  # type: ignore[method-assign]
    bodies = []
    try:
        with TestClient(create_app(settings)) as tc:
            h = {"Authorization": f"Bearer {tokens[0]}"}
            for method, data in queries:
                if method == "GET":
                    r = tc.get("/api/v1/search", params=data, headers=h)
                else:
                    r = tc.post("/api/v1/search", json=data, headers=h)
                r.raise_for_status()
                bodies.append(r.json())
    finally:
        os_client.OrjsonSerializer.loads = real  # type: ignore[method-assign]
    per_query = len(answers) / len(queries)
    size = statistics.fmean(len(a) for a in answers)
    out = [f"parts, in-process over the {len(queries)} queries: {per_query:.1f} answers a query,"
           f" {size / 1000:.1f} kB each"]  # fmt: skip
    for _ in range(2):  # interleaved: stdlib, orjson, stdlib, orjson
        std = _cpu_us(json.loads, answers)
        ours = _cpu_us(orjson.loads, answers)
        out.append(f"  parse an answer: stdlib {std:.1f} us, orjson {ours:.1f} us "
                   f"({ours / std:.2f}x; {(std - ours) * per_query:.0f} us saved a query)")  # fmt: skip
    out.append(f"  finish a body (round timings, size check): "
               f"{_cpu_us(lambda b: respond.fit(respond.rounded(b), 10**9), bodies):.1f} us")  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        handler = logging.FileHandler(Path(folder) / "req.log")
        handler.setFormatter(app_logs.TextFormatter())
        logger = logging.getLogger("bench.service_cpu.request")
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
        fields = {"request_id": uuid.uuid4().hex, "method": "GET", "route": "/api/v1/search",
                  "status": 200, "latency_ms": 12.3, "principal": "prn_user01", "degraded": [],
                  "timings_ms": {"acl": 1.2, "text": 3.4, "vector": 2.1, "total": 9.9}}  # fmt: skip

        def line(_: Any) -> None:
            logger.log(logging.INFO, "%s %s %d", "GET", "/api/v1/search", 200, extra=fields)

        out.append(f"  one request log line (text, to a file): {_cpu_us(line, bodies):.1f} us")
        handler.close()
        logger.removeHandler(handler)
    return "\n".join(out)


def fmt(label: str, r: dict[str, Any]) -> str:
    return (
        f"  {label:5s} ok {r['ok']:5d}/{r['queries']:5d}  CPU {r['cpu_ms_per_query']:6.2f} ms/query"
        f"  util {r['cpu_util']:4.2f}  QPS {r['qps']:6.1f}  p50 {r['p50']:6.1f} ms"
        f"  p90 {r['p90']:6.1f} ms  statuses {r['statuses']}"
    )


def run(args: argparse.Namespace) -> int:
    name = f"svccpu-{uuid.uuid4().hex[:12]}"
    client = OpenSearch(hosts=[args.opensearch_url], timeout=60)
    queries = query_set(args.queries, args.seed)
    results: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    procs: dict[str, subprocess.Popen[bytes]] = {}
    with tempfile.TemporaryDirectory() as home:
        settings = Settings(
            backend="opensearch",
            opensearch_url=args.opensearch_url,
            index_alias=name,
            acl_index=f"{name}-acl",
            embedder="fake",
            home=Path(home),
        )
        logs = Path(home)
        try:
            print(f"index {name} on {args.opensearch_url}", flush=True)
            tokens = build(settings, args.items, args.clients, args.seed)
            if args.parts:
                print(parts(settings, tokens, queries), flush=True)
            trees = {"B": REPO}
            if args.base:
                trees = {"A": Path(args.base).resolve(), "B": REPO}
            urls = {}
            for i, (label, tree) in enumerate(trees.items()):
                port = args.port + i
                urls[label] = f"http://127.0.0.1:{port}"
                procs[label] = start_serve(tree, settings, home, port, logs / f"{label}.log")
                print(f"service {label}: {tree} on port {port}, pid {procs[label].pid}")
            for label, url in urls.items():
                wait_ready(url, procs[label])
                measure(url, procs[label].pid, tokens, queries, args.clients, args.warmup)
            for label, proc in procs.items():
                c0 = cpu_s(proc.pid)
                time.sleep(args.idle)
                idle = (cpu_s(proc.pid) - c0) / args.idle
                print(f"service {label} at rest: {idle * 1000:.1f} ms CPU per second", flush=True)
            for rnd in range(args.rounds):
                order = list(urls) if rnd % 2 == 0 else list(reversed(urls))
                for label in order:
                    r = measure(
                        urls[label], procs[label].pid, tokens, queries, args.clients, args.duration
                    )
                    results[label].append(r)
                    print(f"round {rnd + 1}" + fmt(label, r), flush=True)
            if args.profile:
                for label in urls:
                    out: dict[str, Any] = {}

                    async def load(label: str = label, out: dict[str, Any] = out) -> None:
                        out["r"] = await drive(
                            urls[label], tokens, queries, args.clients, args.profile + 2
                        )

                    loader = asyncio.new_event_loop()
                    task = loader.create_task(load())
                    spy = loader.run_in_executor(
                        None,
                        py_spy_top,
                        procs[label].pid,
                        args.profile,
                        Path(args.results_dir),
                        f"{label}-{name}",
                    )
                    text = loader.run_until_complete(spy)
                    loader.run_until_complete(task)
                    loader.close()
                    print(text, flush=True)
            for label in procs:
                lines = (logs / f"{label}.log").read_bytes().count(b"\n")
                print(f"service {label} log: {lines} lines")
        finally:
            for proc in procs.values():
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
            found = client.indices.get(index=f"{name}*", ignore_unavailable=True)
            if found:
                client.indices.delete(index=",".join(found), ignore=[404])
            client.close()
    print(
        f"\nitems {args.items}, clients {args.clients}, {args.rounds} rounds of {args.duration:g}s"
    )
    for label in sorted(results):
        rs = results[label]
        cpu = [r["cpu_ms_per_query"] for r in rs]
        print(
            f"  {label}: CPU ms/query median {statistics.median(cpu):.2f} "
            f"(rounds {', '.join(f'{c:.2f}' for c in cpu)}), "
            f"QPS median {statistics.median(r['qps'] for r in rs):.1f}, "
            f"p50 median {statistics.median(r['p50'] for r in rs):.1f} ms"
        )
    if "A" in results and "B" in results:
        a = statistics.median(r["cpu_ms_per_query"] for r in results["A"])
        b = statistics.median(r["cpu_ms_per_query"] for r in results["B"])
        print(f"  B/A CPU per query: {b / a:.3f}")
    bad = [r for rs in results.values() for r in rs if r["ok"] != r["queries"]]
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--opensearch-url", default=os.environ.get("SULI_OPENSEARCH_URL", "http://127.0.0.1:9260")
    )
    ap.add_argument("--items", type=int, default=5000)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--duration", type=float, default=20.0, help="measured seconds per round")
    ap.add_argument("--warmup", type=float, default=5.0, help="seconds driven before the rounds")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--idle", type=float, default=5.0, help="seconds of CPU at rest measured")
    ap.add_argument("--queries", type=int, default=200, help="size of the fixed query set")
    ap.add_argument(
        "--parts", action="store_true", help="also time the pieces in-process (parse, log line)"
    )
    ap.add_argument("--base", help="tree of the baseline commit, run as service A")
    ap.add_argument("--profile", type=float, default=0.0, help="py-spy seconds per service")
    ap.add_argument("--port", type=int, default=8870)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", help="also write the output to this file (with command, load)")
    ap.add_argument("--results-dir", default=str(REPO / "bench" / "results"))
    args = ap.parse_args()
    if not args.out:
        return run(args)
    buf = io.StringIO()
    console: TextIO = sys.__stdout__ or sys.stdout

    class Tee(io.TextIOBase):
        def write(self, s: str) -> int:
            console.write(s)
            console.flush()
            return buf.write(s)

    def git(*argv: str) -> str:
        return subprocess.run(["git", *argv], cwd=REPO, capture_output=True, text=True).stdout

    head = (
        f"$ {shlex.join([sys.executable, '-m', 'bench.service_cpu', *sys.argv[1:]])}\n"
        f"date {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}, "
        f"load average before {os.getloadavg()}, cores {os.cpu_count()}\n"
        f"commit {git('rev-parse', 'HEAD').strip()}"
        f" (+ uncommitted changes: {bool(git('status', '--porcelain', '--untracked-files=no').strip())})\n"
    )
    with redirect_stdout(Tee()):
        print(head, flush=True)
        rc = run(args)
        print(f"load average after {os.getloadavg()}")
    Path(args.out).write_text(buf.getvalue())
    return rc


if __name__ == "__main__":
    sys.exit(main())
