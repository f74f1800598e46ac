"""Resolve OpenSearch + k-NN from Maven Central into the cache and compile the launcher, once.

Each OpenSearch line (devcluster.lines) has its own pom, launcher source and cache folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from devcluster import jdk as jdks
from devcluster import lines
from devcluster.errors import ProvisionError
from devcluster.paths import cache_dir

log = logging.getLogger("devcluster")

MARKER = "provisioned.json"
# "guava-32.1.3-jre.jar" -> "guava": one copy of each artifact on the flat classpath.
_VERSION_SUFFIX = re.compile(r"-\d[\w.\-]*\.jar$")


@dataclass(frozen=True)
class Layout:
    """A provisioned cache: server jars, k-NN jars and the compiled launcher."""

    root: Path

    @property
    def lib(self) -> Path:
        """Server, module and transitive jars."""
        return self.root / "lib"

    @property
    def knn(self) -> Path:
        """The unpacked k-NN plugin zip."""
        return self.root / "knn"

    @property
    def launcher(self) -> Path:
        """OsNode.class."""
        return self.root / "launcher"

    @property
    def classpath(self) -> str:
        """Flat classpath; the launcher first so OsNode is found in the application loader."""
        return f"{self.launcher}:{self.lib}/*:{self.knn}/*"


def java_tool(name: str) -> str:
    """Path of java/javac: $JAVA_HOME/bin first, then PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / name).is_file():
        return str(Path(java_home) / "bin" / name)
    found = shutil.which(name)
    if not found:
        raise ProvisionError(f"`{name}` not found: install a JDK 21 or newer (or set JAVA_HOME)")
    return found


def _sources(line: lines.Line) -> tuple[str, str]:
    return (line.pom, line.launcher)


def _fingerprint(line: lines.Line) -> str:
    """Hash of the line's shipped pom and launcher source: a change re-provisions."""
    digest = hashlib.sha256(f"{line.version}/{line.knn}".encode())
    for name in _sources(line):
        digest.update(resources.files("devcluster").joinpath(name).read_bytes())
    return digest.hexdigest()


def _is_current(layout: Layout, fingerprint: str) -> bool:
    try:
        marker = json.loads((layout.root / MARKER).read_text())
    except (OSError, ValueError):
        return False
    complete = all(any(d.glob("*.jar")) for d in (layout.lib, layout.knn)) and any(
        layout.launcher.glob("OsNode*.class")
    )
    return marker.get("fingerprint") == fingerprint and complete


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Serialise provisioning between processes (CLI and a test session at once)."""
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        output = (proc.stdout + proc.stderr).strip().splitlines()
        tail = "\n".join(output[-40:])
        raise ProvisionError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n{tail}")


def drop_duplicates(target: Path, *have_dirs: Path) -> list[str]:
    """Remove target's jars whose artifact a `have_dirs` folder already has (a flat classpath
    needs one copy); returns the names dropped."""
    have = {_VERSION_SUFFIX.sub("", p.name) for d in have_dirs for p in d.glob("*.jar")}
    dropped = []
    for jar in sorted(target.glob("*.jar")):
        if _VERSION_SUFFIX.sub("", jar.name) in have:
            jar.unlink()
            dropped.append(jar.name)
    return dropped


def _size_mb(*dirs: Path) -> float:
    return sum(p.stat().st_size for d in dirs for p in d.rglob("*") if p.is_file()) / 1e6


def _build(staging: Path, line: lines.Line, jdk: jdks.Jdk) -> dict[str, object]:
    """Fill staging/{lib,knn,launcher} from Maven and javac; return facts for the marker."""
    mvn = shutil.which("mvn")
    if not mvn:
        raise ProvisionError("`mvn` not found: install Maven 3 (it fetches OpenSearch jars)")
    javac = jdk.javac or java_tool("javac")
    # Maven writes unpack markers under <pom dir>/target: keep them in the staging area,
    # never next to the installed package, or a later unpack would be skipped.
    build = staging / "build"
    build.mkdir(parents=True)
    pom_path, source = build / "pom.xml", build / line.launcher
    pom_path.write_bytes(resources.files("devcluster").joinpath(line.pom).read_bytes())
    source.write_bytes(resources.files("devcluster").joinpath(line.launcher).read_bytes())
    lib, knn, launcher = staging / "lib", staging / "knn", staging / "launcher"
    pom = str(pom_path)
    started = time.monotonic()
    log.info("resolving OpenSearch %s + k-NN %s from Maven ...", line.version, line.knn)
    _run(
        [mvn, "-B", "-q", "-f", pom, "dependency:copy-dependencies", f"-DoutputDirectory={lib}",
         "-DincludeScope=runtime", "-DexcludeTypes=zip"],
        "mvn copy-dependencies",
    )  # fmt: skip
    _run(
        [mvn, "-B", "-q", "-f", pom, "dependency:unpack-dependencies", f"-DoutputDirectory={knn}",
         "-DincludeTypes=zip", "-DincludeArtifactIds=opensearch-knn"],
        "mvn unpack-dependencies (k-NN zip)",
    )  # fmt: skip
    resolve_s = time.monotonic() - started
    dropped = drop_duplicates(knn, lib)
    for name in dropped:
        log.info("dropped duplicate k-NN jar %s", name)
    log.info("compiling the launcher ...")
    _run(
        # --release <the line's oldest Java> (17 for 2.19, 21 for 3.x, whose jars javac cannot
        # read for an older target): the class then runs on every JDK the line may start on.
        [javac, "-nowarn", "--release", str(line.java_min), "-d", str(launcher),
         "-cp", f"{lib}/*", str(source)],
        f"javac {line.launcher}",
    )  # fmt: skip
    return {
        "opensearch": line.version,
        "knn": line.knn,
        "jars": len(list(lib.glob("*.jar"))) + len(list(knn.glob("*.jar"))),
        "size_mb": round(_size_mb(lib, knn), 1),
        "resolve_seconds": round(resolve_s, 1),
        "dropped_duplicates": dropped,
    }


def provision(
    cache: str | Path | None = None,
    version: str = lines.DEFAULT_VERSION,
    jdk: jdks.Jdk | None = None,
) -> Layout:
    """Make sure the cache holds OpenSearch `version`, its k-NN and the launcher; no work when
    it already does. The launcher is compiled with `jdk`'s javac (else a JDK fitting the line)."""
    line = lines.get(version)
    root = cache_dir(cache, line.version)
    layout = Layout(root)
    fingerprint = _fingerprint(line)
    if _is_current(layout, fingerprint):
        return layout
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / ".lock"):
        if _is_current(layout, fingerprint):  # another process finished while we waited
            return layout
        staging = root / f".staging-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        try:
            needed_by = f"OpenSearch {line.version}"
            javac_jdk = jdk or jdks.choose(minimum=line.java_min, needed_by=needed_by)
            facts = _build(staging, line, javac_jdk)
            (root / MARKER).unlink(missing_ok=True)
            for part in ("lib", "knn", "launcher"):
                shutil.rmtree(root / part, ignore_errors=True)
                (staging / part).rename(root / part)
            facts["fingerprint"] = fingerprint
            (root / MARKER).write_text(json.dumps(facts, indent=2) + "\n")
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    log.info(
        "provisioned %s jars (%s MB) in %s s into %s",
        facts["jars"], facts["size_mb"], facts["resolve_seconds"], root,
    )  # fmt: skip
    return layout
