"""The OpenSearch lines a local cluster can run, and what differs between them.

2.19.1 is the default: it is the one line with the full plugin set here (neural-search and
security are published on Maven Central for 2.19 only), and it runs on Java 17. 3.5.0 needs
Java 21 or newer, a launcher of its own (3.x builds a Node from PluginInfo descriptors and
renamed the module plugins to *ModulePlugin) and a few more jars for k-NN (see its pom).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import PurePath

VERSION_ENV = "SULI_CLUSTER_VERSION"


@dataclass(frozen=True)
class Line:
    """One OpenSearch version with its k-NN build, dependency holder and launcher."""

    version: str
    knn: str
    pom: str  # file in devcluster/
    launcher: str  # Java source in devcluster/; its public class is the file's stem
    java_min: int  # oldest Java the line runs on; the launcher is compiled for it
    plugin_classes: tuple[str, ...]  # the launcher's DEFAULT_PLUGINS, in the same order
    extra_plugins: tuple[str, ...] = ()  # devcluster.plugins.KNOWN names Maven serves for it

    @property
    def major(self) -> int:
        return int(self.version.split(".", 1)[0])

    @property
    def main_class(self) -> str:
        return PurePath(self.launcher).stem


DEFAULT_VERSION = "2.19.1"

LINES: dict[str, Line] = {
    line.version: line
    for line in (
        Line(
            version="2.19.1",
            knn="2.19.1.0",
            pom="pom.xml",
            launcher="OsNode.java",
            java_min=17,
            plugin_classes=(
                "org.opensearch.transport.Netty4Plugin",
                "org.opensearch.painless.PainlessPlugin",
                "org.opensearch.analysis.common.CommonAnalysisPlugin",
                "org.opensearch.index.mapper.MapperExtrasPlugin",
                "org.opensearch.index.reindex.ReindexPlugin",
                "org.opensearch.knn.plugin.KNNPlugin",
            ),
            extra_plugins=("neural-search", "security"),
        ),
        Line(
            version="3.5.0",
            knn="3.5.0.0",
            pom="pom-3.5.0.xml",
            launcher="OsNode3.java",
            java_min=21,  # OpenSearch 3.x is built for Java 21 (3.5 is tested on 21 and 25)
            plugin_classes=(
                "org.opensearch.transport.Netty4ModulePlugin",
                "org.opensearch.painless.PainlessModulePlugin",
                "org.opensearch.analysis.common.CommonAnalysisModulePlugin",
                "org.opensearch.index.mapper.MapperExtrasModulePlugin",
                "org.opensearch.index.reindex.ReindexModulePlugin",
                "org.opensearch.knn.plugin.KNNPlugin",
            ),
        ),
    )
}

# What a node's argv names as its main class, whichever line it runs.
MAIN_CLASSES = frozenset(line.main_class for line in LINES.values())


def get(version: str | None = None) -> Line:
    """The line of `version`, else of $SULI_CLUSTER_VERSION, else 2.19.1; ValueError if unknown."""
    chosen = version or os.environ.get(VERSION_ENV) or DEFAULT_VERSION
    try:
        return LINES[chosen]
    except KeyError:
        known = ", ".join(LINES)
        raise ValueError(f"unknown OpenSearch version {chosen!r}; known: {known}") from None
