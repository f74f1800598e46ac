"""Start-up time of the CLI: `suli --version` and `suli search` on the demo store with a warm
vector cache, each against the same run's `python -c pass` and the imports a search cannot
do without (click, numpy, pydantic-settings), plus the top imports of each.

Goals: `suli --version` <= 0.15 s and `suli search` <= 0.5 s wall (medians). The three commands
run interleaved, so a load that comes and goes weighs on all three alike; the load average
and the core count are written beside the figures, since on a shared machine they move them.

Run from the repo root: .venv/bin/python -m bench.startup [--runs 20] [--out PATH]
[--base DIR] (default output bench/results/startup-<UTC date>.txt). --base DIR adds the same
search run from another source tree (e.g. `git archive` of an older commit), for a before/after.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SULI = Path(sys.executable).with_name("suli")
GOALS = {"suli --version": 0.15, "suli search": 0.5}
QUERY = ("deploy", "checklist")
BASE_CODE = "import sys; sys.argv[0] = 'suli'; from cli.main import cli; cli()"
FLOOR_CODE = "import click, numpy, pydantic_settings"
HEAVY = ("onnxruntime", "tokenizers", "httpx", "rich", "opensearchpy", "fastapi", "uvicorn")


def _run(argv: Sequence[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one run (it must succeed). CPU time
    moves less with the machine's load than wall time does, so both are reported."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    # cwd "/": `python -c` puts the current directory first on sys.path, which would shadow
    # a --base tree given through PYTHONPATH.
    subprocess.run(
        argv, env=env, cwd="/", check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def top_imports(argv: Sequence[str], env: dict[str, str], n: int = 12) -> list[tuple[int, str]]:
    """(cumulative microseconds, module) of the n slowest top-level imports of one run."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", *argv], env=env, capture_output=True, text=True
    )
    rows = []
    for line in out.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line.split("|")
        if name.startswith(" ") and not name.startswith("  "):  # nesting level 0
            rows.append((int(cumulative), name.strip()))
    return sorted(rows, reverse=True)[:n]


def _stats(xs: list[float]) -> str:
    xs = sorted(xs)
    p90 = xs[min(len(xs) - 1, round(0.9 * (len(xs) - 1)))]
    return f"median {statistics.median(xs):.3f} s  p90 {p90:.3f} s  min {xs[0]:.3f} s"


def prepare(home: Path) -> tuple[dict[str, str], Path]:
    """A demo store in home and one search already run on it (the query vector is cached)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SULI_")}
    env |= {"SULI_HOME": str(home), "SULI_EMBEDDER": env.get("BENCH_EMBEDDER", "minilm")}
    db = home / "demo.db"
    subprocess.run(
        [str(SULI), "demo", "--db", str(db), "--no-serve"],
        env=env,
        check=True,
        capture_output=True,
    )
    search = [str(SULI), "--db", str(db), "search", *QUERY, "--as", "prn_ana"]
    subprocess.run(search, env=env, check=True, capture_output=True)  # warms the cache
    return env, db


def measure(runs: int, home: Path, base: Path | None = None) -> str:
    """The report: commands, load, per-command wall times and their top imports."""
    env, db = prepare(home)
    search = ["--db", str(db), "search", *QUERY, "--as", "prn_ana"]
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "suli --version": [str(SULI), "--version"],
        "suli search": [str(SULI), *search],
        # What no lazy import can remove from a search on the embedded store: the settings
        # model (pydantic-settings), the vector maths (numpy) and the CLI framework (click).
        "floor imports": [sys.executable, "-c", FLOOR_CODE],
    }
    envs = {name: env for name in commands}
    if base is not None:
        commands["search (--base)"] = [sys.executable, "-c", BASE_CODE, *search]
        envs["search (--base)"] = {**env, "PYTHONPATH": str(base.resolve())}
    load_before = os.getloadavg()
    times: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, argv in commands.items():
            wall, used = _run(argv, envs[name])
            times[name].append(wall)
            cpu[name].append(used)
    load_after = os.getloadavg()
    floor = statistics.median(times["python -c pass"])
    lines = [
        f"bench/startup.py, {datetime.now(UTC).isoformat(timespec='seconds')}",
        f"python {sys.version.split()[0]}, {os.cpu_count()} cores, "
        f"load average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
        f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}",
        (f"--base {base}\n" if base else "")
        + f"{runs} runs each, interleaved; store {db.name} (the demo's 1,000 items), "
        f"query {' '.join(QUERY)!r} with its vector cached (SULI_EMBEDDER={env['SULI_EMBEDDER']})",
        "",
    ]
    for name, xs in times.items():
        over = "" if name == "python -c pass" else f"  (+{statistics.median(xs) - floor:.3f} s)"
        goal = GOALS.get(name)
        verdict = ""
        if goal is not None:
            met = statistics.median(xs) <= goal
            verdict = f"  goal <= {goal} s: {'met' if met else 'MISSED'}"
        lines.append(
            f"{name:<15} {_stats(xs)}{over}{verdict}\n{'':<15} cpu (user+sys) median "
            f"{statistics.median(cpu[name]):.3f} s"
        )
    lines.append("")
    for name, argv in commands.items():
        if name in ("python -c pass", "search (--base)", "floor imports"):
            continue
        script = [str(SULI), *argv[1:]]
        top = top_imports(script, env)
        lines.append(f"top imports of {name} (-X importtime, cumulative):")
        lines += [f"  {us / 1000:8.1f} ms  {module}" for us, module in top]
        heavy = [m for _, m in top_imports(script, env, n=10_000) if m in HEAVY]
        lines.append(f"  heavy packages imported: {', '.join(heavy) or 'none'}")
        lines.append("")
    for what, table in (("wall", times), ("cpu", cpu)):
        lines.append(f"raw {what} times (s):")
        for name, xs in table.items():
            lines.append(f"  {name}: {' '.join(f'{x:.3f}' for x in xs)}")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--base", type=Path, help="Another source tree to time the search from.")
    args = ap.parse_args(argv)
    day = datetime.now(UTC).strftime("%Y%m%d")
    out = args.out or ROOT / "bench" / "results" / f"startup-{day}.txt"
    with tempfile.TemporaryDirectory(prefix="suli-startup-") as home:
        report = measure(args.runs, Path(home), args.base)
    out.write_text(report)
    print(report, end="")
    print(f"written to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
