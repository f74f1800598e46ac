"""Shared fixtures: a real OpenSearch (from env, a local node, or Docker) and uuid-named indices.

Tests that need OpenSearch never skip: when none can be reached or started the fixture fails
with the reason (and in CI that fails the build). Sub-folders add their own conftest files.
A test's tier marker comes from its folder (`tier_of`), never from a hand-placed mark.
"""

from __future__ import annotations

import os
import shutil
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from uuid import uuid4

import pytest
from opensearchpy import NotFoundError, OpenSearch

import devcluster

OPENSEARCH_IMAGE = "opensearchproject/opensearch:2.19.1"
TESTS = Path(__file__).resolve().parent
# Each folder is a tier and names its marker (registered in pyproject.toml). Deriving the mark
# from the folder means a new module cannot forget it: a forgotten `unit` mark once kept a
# data-loss test out of `pytest -m unit`. `unit` promises no services; the other tiers need
# OpenSearch, a server, a browser or the model (contract/ runs the embedded store too).
TIERS = ("unit", "contract", "integration", "api", "cluster", "e2e")
# A 3-node cluster of its own, away from a dev node on 9200 and the single test node.
THREE_NODE_HTTP_PORT = int(os.environ.get("SULI_TEST_CLUSTER_HTTP_PORT", "9211"))


def tier_of(path: Path) -> str | None:
    """The tier marker of a test file: the name of its folder under tests/, if that is a tier."""
    try:
        parts = path.resolve().relative_to(TESTS).parts
    except ValueError:  # outside tests/ (e.g. a path given on the command line elsewhere)
        return None
    return parts[0] if len(parts) > 1 and parts[0] in TIERS else None


# tryfirst: the marks must be on the items before `-m` selects among them.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        tier = tier_of(item.path)
        if tier is not None:
            item.add_marker(tier)


def _probe(url: str) -> str | None:
    """None when url answers like OpenSearch; else why not."""
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            resp.read()
    except urllib.error.HTTPError as err:
        return f"HTTP {err.code}" if err.code not in (401, 403) else None  # secured but alive
    except (OSError, ValueError) as err:
        return str(err)
    return None


def _docker_reachable() -> bool:
    """True only when a Docker engine actually answers (the docker package alone is not enough)."""
    try:
        import docker

        client = docker.from_env(timeout=5)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # any failure means: no usable engine
        return False


def _devcluster_node(state: Path) -> Iterator[str]:
    port = devcluster.free_port_pair()
    try:
        node = devcluster.up(nodes=1, http_port=port, state=state)
    except devcluster.ClusterError as err:
        pytest.fail(f"could not start a local OpenSearch node: {err}", pytrace=False)
    try:
        yield node.url
    finally:
        devcluster.down(state)


def _docker_node() -> Iterator[str]:
    from testcontainers.community.opensearch import OpenSearchContainer

    with OpenSearchContainer(OPENSEARCH_IMAGE, security_enabled=False) as container:
        config = container.get_config()
        yield f"http://{config['host']}:{config['port']}"


@pytest.fixture(scope="session")
def opensearch_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a real OpenSearch: $SULI_TEST_OPENSEARCH_URL / $SULI_OPENSEARCH_URL, else one started here.

    Started here = a single local node built from Maven (java + mvn), or a testcontainers
    node when only a Docker engine is available; it is stopped at session end.
    """
    url = os.environ.get("SULI_TEST_OPENSEARCH_URL") or os.environ.get("SULI_OPENSEARCH_URL")
    if url:
        url = url.split(",")[0].strip().rstrip("/")
        problem = _probe(url)
        if problem:
            pytest.fail(f"OpenSearch at {url} (from the environment) is unreachable: {problem}")
        yield url
    elif shutil.which("java") and shutil.which("mvn"):
        yield from _devcluster_node(tmp_path_factory.mktemp("opensearch"))
    elif _docker_reachable():
        yield from _docker_node()
    else:
        pytest.fail(
            "no OpenSearch: set SULI_TEST_OPENSEARCH_URL, or install Java 17 + Maven "
            "(`suli cluster up`), or run a Docker engine",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def os_client(opensearch_url: str) -> Iterator[OpenSearch]:
    """An opensearch-py client for the session's OpenSearch."""
    client = OpenSearch(hosts=[opensearch_url], timeout=60)
    yield client
    client.close()


def _delete_prefixed(client: OpenSearch, prefix: str) -> None:
    """Delete every alias and index whose name starts with prefix (hidden and closed too)."""
    pattern = f"{prefix}*"
    try:
        aliases = client.indices.get_alias(name=pattern, expand_wildcards="all")
    except NotFoundError:
        aliases = {}
    for index, entry in aliases.items():
        for alias in entry.get("aliases", {}):
            client.indices.delete_alias(index=index, name=alias, ignore=[404])
    indices = client.indices.get(index=pattern, expand_wildcards="all", ignore_unavailable=True)
    if indices:
        # Named explicitly: wildcard deletes may be refused (action.destructive_requires_name).
        client.indices.delete(index=",".join(indices), ignore=[404])


@pytest.fixture
def make_index_name(os_client: OpenSearch) -> Iterator[Callable[[], str]]:
    """Factory of fresh `test-<uuid>` names; every index/alias starting with one is deleted after."""
    made: list[str] = []

    def make() -> str:
        name = f"test-{uuid4().hex}"
        made.append(name)
        return name

    yield make
    for name in made:
        _delete_prefixed(os_client, name)


@pytest.fixture
def index_name(make_index_name: Callable[[], str]) -> str:
    """One fresh `test-<uuid>` index name, cleaned up after the test."""
    return make_index_name()


@pytest.fixture(scope="session")
def three_node_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[devcluster.Cluster]:
    """A local 3-node cluster (HTTP 9211-9213, transport 9311-9313), stopped at session end.

    Yields a devcluster.Cluster: `.urls`, `.kill(i)`, `.start(i)`, `.wait_green()` (i is 0-based).
    State lives in $SULI_CLUSTER_DIR/three when set (so CI can clean it up), else in pytest's tmp.
    """
    base = os.environ.get("SULI_CLUSTER_DIR")
    state = Path(base) / "three" if base else tmp_path_factory.mktemp("three-node")
    devcluster.down(state, wipe=True)  # leftovers of an aborted session
    try:
        cluster = devcluster.up(
            nodes=3,
            http_port=THREE_NODE_HTTP_PORT,
            transport_port=THREE_NODE_HTTP_PORT + 100,
            state=state,
        )
    except devcluster.ClusterError as err:
        pytest.fail(f"could not start the local 3-node cluster: {err}", pytrace=False)
    try:
        yield cluster
    finally:
        devcluster.down(state)
