"""`suli`: one Click group; each sub-command parses input, calls the core and formats output."""

from __future__ import annotations

import click

from cli.cluster import cluster


@click.group()
@click.version_option(package_name="suli")
def cli() -> None:
    """Suli: permission-aware hybrid search for work items."""


cli.add_command(cluster)
