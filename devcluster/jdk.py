"""Pick the JDK a node runs on: the newest installed >= 21, so Lucene uses its SIMD vector code.

Lucene 9.12 (OpenSearch 2.19) vectorises HNSW distance maths with the `jdk.incubator.vector`
module on Java 21 and later; on Java 17 it falls back to scalar loops. The official 2.19
distribution bundles JDK 21 for that reason, so the dev cluster follows it. OpenSearch 3.x
runs on nothing older than 21 (its line's `java_min`, passed to `choose` as `minimum`).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from devcluster.errors import ProvisionError

log = logging.getLogger("devcluster")

SIMD_MIN = 21  # first Java whose vector incubator API Lucene 9.12 uses
JVM_DIRS = (Path("/usr/lib/jvm"), Path("/usr/java"), Path("/opt/java"))
_VERSION = re.compile(r'^JAVA_VERSION="([^"]+)"', re.MULTILINE)
_JAVA_DASH_VERSION = re.compile(r'version "([^"]+)"')


@dataclass(frozen=True)
class Jdk:
    """An installed JDK: its home and version (`feature` is 17 for "17.0.15", 8 for "1.8.0")."""

    home: Path
    version: str

    @property
    def feature(self) -> int:
        return feature_version(self.version)

    @property
    def java(self) -> str:
        return str(self.home / "bin" / "java")

    @property
    def javac(self) -> str | None:
        path = self.home / "bin" / "javac"
        return str(path) if path.is_file() else None

    @property
    def simd(self) -> bool:
        """True when Lucene can use the vector incubator API on this JDK."""
        return self.feature >= SIMD_MIN

    def jvm_flags(self) -> list[str]:
        """Flags that turn Lucene's vector code on; none before Java 21.

        Lucene refuses Java versions newer than it was tested with unless told the upper
        bound, hence upperJavaFeatureVersion set to exactly this JDK's version.
        """
        if not self.simd:
            return []
        return [
            "--add-modules=jdk.incubator.vector",
            f"-Dorg.apache.lucene.vectorization.upperJavaFeatureVersion={self.feature}",
        ]

    def describe(self) -> str:
        """One line for the operator: which Java, and whether vector search has SIMD."""
        if self.simd:
            return f"Java {self.version} at {self.home}: Lucene vector code (SIMD) on"
        return (
            f"Java {self.version} at {self.home}: vector search runs WITHOUT SIMD (Lucene needs "
            f"Java >= {SIMD_MIN}); install a JDK >= {SIMD_MIN} or pass --java"
        )


def feature_version(version: str) -> int:
    """17 for "17.0.15", 25 for "25", 8 for "1.8.0_402"; 0 when unreadable."""
    parts = re.findall(r"\d+", version)
    if not parts:
        return 0
    if parts[0] == "1" and len(parts) > 1:
        return int(parts[1])
    return int(parts[0])


def read_jdk(home: Path) -> Jdk | None:
    """The JDK at `home` (its `release` file, else `java -version`); None if not a JDK."""
    home = home.resolve()
    if not (home / "bin" / "java").is_file():
        return None
    try:
        found = _VERSION.search((home / "release").read_text(errors="replace"))
    except OSError:
        found = None
    if found:
        return Jdk(home, found.group(1))
    try:
        proc = subprocess.run(
            [str(home / "bin" / "java"), "-version"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = _JAVA_DASH_VERSION.search(proc.stderr + proc.stdout)
    return Jdk(home, match.group(1)) if match else None


def _home_of(java: str) -> Path:
    """.../bin/java (through symlinks such as /usr/bin/java -> alternatives) -> the JDK home."""
    return Path(java).resolve().parent.parent


def installed(jvm_dirs: Iterable[Path] = JVM_DIRS) -> list[Jdk]:
    """JDKs in $JAVA_HOME, the usual JVM folders and `java` on PATH; newest first, no repeats."""
    homes: list[Path] = []
    if os.environ.get("JAVA_HOME"):
        homes.append(Path(os.environ["JAVA_HOME"]))
    for folder in jvm_dirs:
        if folder.is_dir():
            homes += sorted(folder.iterdir())
    on_path = shutil.which("java")
    if on_path:
        homes.append(_home_of(on_path))
    seen: dict[Path, Jdk] = {}
    for home in homes:
        jdk = read_jdk(home)
        if jdk and jdk.home not in seen:  # symlinked aliases (openjdk-17) resolve to one
            seen[jdk.home] = jdk
    return sorted(seen.values(), key=lambda j: (j.feature, j.version), reverse=True)


def override_home(path: str) -> Path:
    """--java takes a JDK home or its bin/java; both name the same JDK."""
    given = Path(path).expanduser()
    return _home_of(str(given)) if given.is_file() else given


def _fitting(found: list[Jdk], minimum: int) -> str:
    fit = [j for j in found if j.feature >= minimum]
    return f" (installed and new enough: {fit[0].home})" if fit else ""


def choose(
    java: str | None = None,
    jvm_dirs: Iterable[Path] = JVM_DIRS,
    minimum: int = 0,
    needed_by: str = "this OpenSearch",
) -> Jdk:
    """`java` (--java), else $SULI_JAVA_HOME, else $JAVA_HOME, else the newest installed JDK.

    `minimum` is the oldest Java the OpenSearch line runs on. --java and SULI_JAVA_HOME are
    choices made for the cluster: one older than that is refused, naming a JDK that fits.
    JAVA_HOME is the machine's default for everything, so one too old is passed over (with
    a warning) for the newest installed JDK that fits.
    """
    for source, value in (
        ("--java", java),
        ("SULI_JAVA_HOME", os.environ.get("SULI_JAVA_HOME")),
        ("JAVA_HOME", os.environ.get("JAVA_HOME")),
    ):
        if not value:
            continue
        jdk = read_jdk(override_home(value))
        if jdk is None:
            raise ProvisionError(f"{source}={value} is not a JDK (no bin/java there)")
        if jdk.feature >= minimum:
            return jdk
        if source != "JAVA_HOME":
            raise ProvisionError(
                f"{needed_by} needs Java >= {minimum}, but {source}={value} is Java "
                f"{jdk.version}; name a JDK {minimum} or newer"
                f"{_fitting(installed(jvm_dirs), minimum)}"
            )
        log.warning(
            "JAVA_HOME=%s is Java %s, too old for %s (needs >= %s): looking for a newer JDK",
            value, jdk.version, needed_by, minimum,
        )  # fmt: skip
    found = installed(jvm_dirs)
    if not found:
        want = max(minimum, SIMD_MIN)
        raise ProvisionError(f"no JDK found: install a JDK {want} or newer (or set JAVA_HOME)")
    if found[0].feature < minimum:
        have = ", ".join(f"Java {j.version} at {j.home}" for j in found)
        raise ProvisionError(
            f"{needed_by} needs Java >= {minimum}, and the only JDKs found are: {have}; "
            f"install a JDK {minimum} or newer (Temurin 25 is what OpenSearch 3.5 bundles) "
            "or pass --java"
        )
    return found[0]
