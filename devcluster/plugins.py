"""Extra OpenSearch plugins a local cluster may load beside k-NN, fetched from Maven Central once.

The embedded launcher (OsNode) takes plugin classes from `-Dosnode.plugins` and finds them on
the flat classpath, so an extra plugin is its zip's jars in a cache folder plus its class name.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from dataclasses import dataclass
from pathlib import Path

from devcluster.errors import ProvisionError
from devcluster.lines import DEFAULT_VERSION, LINES, Line
from devcluster.provision import drop_duplicates

_DEFAULT_LINE = LINES[DEFAULT_VERSION]
# The default launcher's DEFAULT_PLUGINS (each line's are in devcluster.lines; a unit test
# keeps them equal to the Java sources, since -Dosnode.plugins replaces that list).
BASE_PLUGIN_CLASSES = _DEFAULT_LINE.plugin_classes
MARKER = "fetched.json"


@dataclass(frozen=True)
class ExtraPlugin:
    """A plugin zip on Maven Central and the Plugin classes it brings."""

    name: str
    coordinates: str  # group:artifact
    classes: tuple[str, ...]

    def artifact(self, line: Line = _DEFAULT_LINE) -> str:
        """group:artifact:version:zip for a line: plugins are released in lockstep with
        OpenSearch, so the k-NN version is theirs too."""
        return f"{self.coordinates}:{line.knn}:zip"


KNOWN: dict[str, ExtraPlugin] = {
    p.name: p
    for p in (
        ExtraPlugin(
            "neural-search",
            "org.opensearch.plugin:neural-search",
            ("org.opensearch.neuralsearch.plugin.NeuralSearch",),
        ),
        ExtraPlugin(  # loaded by `up(secure=True)`; see devcluster.security
            "security",
            "org.opensearch.plugin:opensearch-security",
            ("org.opensearch.security.OpenSearchSecurityPlugin",),
        ),
    )
}


def check(names: tuple[str, ...], line: Line = _DEFAULT_LINE) -> None:
    """ValueError naming the first plugin this helper cannot load on the line."""
    for name in names:
        if name not in KNOWN:
            raise ValueError(f"unknown plugin {name!r}; known: {', '.join(sorted(KNOWN))}")
        if name not in line.extra_plugins:
            served = [v for v, other in LINES.items() if name in other.extra_plugins]
            raise ValueError(
                f"plugin {name!r} is not available for OpenSearch {line.version}: Maven "
                f"Central serves its zip for {', '.join(served)} only"
            )


def plugin_classes(names: tuple[str, ...], line: Line = _DEFAULT_LINE) -> str:
    """The -Dosnode.plugins value: the launcher's defaults, then each extra plugin's classes."""
    extra = [cls for name in names for cls in KNOWN[name].classes]
    return ",".join((*line.plugin_classes, *extra))


def jar_dir(cache_root: Path, name: str) -> Path:
    """Where plugin `name`'s jars live in the artifact cache."""
    return cache_root / "plugins" / name


def fetch(name: str, cache_root: Path, *have: Path, line: Line = _DEFAULT_LINE) -> Path:
    """The plugin's jars, downloaded with mvn and unzipped on first use; cached after that.

    Jars whose artifact one of the `have` folders already holds are dropped: a flat
    classpath needs one copy, and the server's (first on the classpath) would win anyway.
    """
    artifact = KNOWN[name].artifact(line)
    jars = jar_dir(cache_root, name)
    try:
        if json.loads((jars / MARKER).read_text()).get("artifact") == artifact:
            return jars
    except (OSError, ValueError):
        pass
    mvn = shutil.which("mvn")
    if not mvn:
        raise ProvisionError("`mvn` not found: install Maven 3 (it fetches plugin zips)")
    staging = jars.with_name(f".{name}-staging-{os.getpid()}")  # two fetches never share one
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        download = staging / "download"
        proc = subprocess.run(
            [mvn, "-B", "-q", "dependency:copy", f"-Dartifact={artifact}",
             f"-DoutputDirectory={download}"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-40:])
            raise ProvisionError(f"mvn could not fetch {artifact}:\n{tail}")
        unpacked = staging / "jars"
        unpacked.mkdir()
        with zipfile.ZipFile(next(download.glob("*.zip"))) as archive:
            for member in archive.namelist():
                if member.endswith(".jar"):
                    (unpacked / Path(member).name).write_bytes(archive.read(member))
        dropped = drop_duplicates(unpacked, *have)
        (unpacked / MARKER).write_text(
            json.dumps({"artifact": artifact, "dropped_duplicates": dropped}) + "\n"
        )
        shutil.rmtree(jars, ignore_errors=True)
        unpacked.rename(jars)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return jars
