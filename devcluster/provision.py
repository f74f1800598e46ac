"""Resolve OpenSearch + k-NN from Maven Central into the cache and compile the launcher, once."""

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

from devcluster import jdk
from devcluster.errors import ProvisionError
from devcluster.paths import KNN_VERSION, OPENSEARCH_VERSION, cache_dir

log = logging.getLogger("devcluster")

MARKER = "provisioned.json"
_SOURCES = ("pom.xml", "OsNode.java")
LAUNCHER_RELEASE = "17"  # the oldest Java OpenSearch 2.19 runs on
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


def _fingerprint() -> str:
    """Hash of the shipped pom and launcher source: a change re-provisions."""
    digest = hashlib.sha256(f"{OPENSEARCH_VERSION}/{KNN_VERSION}".encode())
    for name in _SOURCES:
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


def _build(staging: Path) -> dict[str, object]:
    """Fill staging/{lib,knn,launcher} from Maven and javac; return facts for the marker."""
    mvn = shutil.which("mvn")
    if not mvn:
        raise ProvisionError("`mvn` not found: install Maven 3 (it fetches OpenSearch jars)")
    javac = jdk.choose().javac or java_tool("javac")
    # Maven writes unpack markers under <pom dir>/target: keep them in the staging area,
    # never next to the installed package, or a later unpack would be skipped.
    build = staging / "build"
    build.mkdir(parents=True)
    for name in _SOURCES:
        (build / name).write_bytes(resources.files("devcluster").joinpath(name).read_bytes())
    lib, knn, launcher = staging / "lib", staging / "knn", staging / "launcher"
    pom = str(build / "pom.xml")
    started = time.monotonic()
    log.info("resolving OpenSearch %s + k-NN %s from Maven ...", OPENSEARCH_VERSION, KNN_VERSION)
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
        # --release 17: the class then runs on every JDK a node may be started with (17..25).
        [javac, "-nowarn", "--release", LAUNCHER_RELEASE, "-d", str(launcher), "-cp", f"{lib}/*",
         str(build / "OsNode.java")],
        "javac OsNode.java",
    )  # fmt: skip
    return {
        "opensearch": OPENSEARCH_VERSION,
        "knn": KNN_VERSION,
        "jars": len(list(lib.glob("*.jar"))) + len(list(knn.glob("*.jar"))),
        "size_mb": round(_size_mb(lib, knn), 1),
        "resolve_seconds": round(resolve_s, 1),
        "dropped_duplicates": dropped,
    }


def provision(cache: str | Path | None = None) -> Layout:
    """Make sure the cache holds OpenSearch, k-NN and the launcher; no work when it already does."""
    root = cache_dir(cache)
    layout = Layout(root)
    fingerprint = _fingerprint()
    if _is_current(layout, fingerprint):
        return layout
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / ".lock"):
        if _is_current(layout, fingerprint):  # another process finished while we waited
            return layout
        staging = root / f".staging-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        try:
            facts = _build(staging)
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
