"""`suli security`: Suli's least-privilege roles for a secured OpenSearch (security plugin)."""

from __future__ import annotations

import json

import click

from cli import context
from cli.output import handle_errors


def _mapping(_ctx: click.Context, _param: click.Parameter, value: tuple[str, ...]) -> dict:
    from suli.backends.opensearch import roles

    out: dict[str, list[str]] = {}
    for entry in value:
        role, _, user = entry.partition("=")
        if role not in roles.ROLE_NAMES or not user:
            raise click.BadParameter(
                f"{entry!r}: use ROLE=USER with ROLE one of {', '.join(roles.ROLE_NAMES)}"
            )
        out.setdefault(role, []).append(user)
    return out


@click.group(short_help="Least-privilege roles on a secured cluster.")
def security() -> None:
    """Least-privilege roles for Suli on a cluster with the security plugin."""


@security.command("roles", short_help="Print (or --apply) Suli's least-privilege roles.")
@click.option(
    "--apply",
    "apply_",
    is_flag=True,
    help="Write the roles through the security REST API (SULI_OPENSEARCH_* must name an "
    "admin credential) instead of printing them.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["yml", "rest"]),
    default="yml",
    show_default=True,
    help="yml: the plugin's roles.yml; rest: the REST API bodies as JSON.",
)
@click.option(
    "--map",
    "users",
    multiple=True,
    callback=_mapping,
    metavar="ROLE=USER",
    help="With --apply, also map ROLE to USER (repeatable; replaces the role's mapping).",
)
@click.option("--alias", help="Items alias or pattern [default: SULI_INDEX_ALIAS].")
@click.option("--acl-index", help="ACL index or pattern [default: SULI_ACL_INDEX].")
@click.pass_context
@handle_errors
def roles_cmd(
    ctx: click.Context,
    apply_: bool,
    fmt: str,
    users: dict[str, list[str]],
    alias: str | None,
    acl_index: str | None,
) -> None:
    """Print (or --apply) the roles suli_query, suli_indexer and suli_admin.

    suli_query reads the items and the ACL index; suli_indexer writes items; suli_admin owns
    ACLs, principals, tokens, index creation and reindexing (docs/operations.md, "Deploying
    on a secured cluster"). Roles cover Suli's alias and ACL index of these settings only.
    """
    from suli.backends.opensearch import roles

    settings = context.settings(ctx)
    defs = roles.definitions(alias or settings.index_alias, acl_index or settings.acl_index)
    if users and not apply_:
        raise click.UsageError("--map needs --apply")
    if not apply_:
        click.echo(roles.roles_yml(defs) if fmt == "yml" else json.dumps(defs, indent=2))
        return
    if settings.backend != "opensearch":
        raise click.UsageError("--apply needs SULI_OPENSEARCH_URL (and an admin credential)")
    from suli.backends.opensearch import make_client

    client = make_client(settings)
    try:
        for line in roles.apply(client, defs, users):
            click.echo(f"applied {line}", err=True)
    finally:
        client.close()
