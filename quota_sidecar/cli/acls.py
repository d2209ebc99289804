"""`quota-sidecar acls`: the ACLs a principal needs for what it runs, printed or applied."""

from __future__ import annotations

import json
import sys

import click

from ..common.errors import AdminError, ConfigError
from ..decide import acls as permissions
from ..serve import acls_text
from .grammar import UNREACHABLE, config_options, epilog, fail, load_config, output_option


@click.command("acls", epilog=epilog(
    "acls", "quota-sidecar acls --config server.properties --principal User:quota-sidecar",
    "quota-sidecar acls --config aggregator.properties --principal User:aggregator --for aggregate -o table",
    "quota-sidecar acls --config server.properties --principal User:quota-sidecar --apply "
    "--command-config admin.properties"))
@config_options
@click.option("--principal", required=True, help="The principal the process runs as, Type:name (User:quota-sidecar).")
@click.option("--for", "processes", multiple=True, metavar="PROCESS",
              help="What the principal runs: run (the default), aggregate, status-direct, plan, cleanup (what "
                   "run --cleanup adds); repeat it or separate with commas.")
@click.option("--aggregator", is_flag=True, help="The principal runs the aggregator (--for aggregate).")
@click.option("--command-config", metavar="FILE",
              help="The client properties (Java's names) of a principal allowed to create ACLs: passed on to "
                   "kafka-acls.sh, or used by --apply.")
@output_option("commands", "table", "json", aliases={"--table": "table", "--json": "json"})
@click.option("--apply", "apply", is_flag=True,
              help="Create the ACLs missing, as the principal of --command-config; remove none. Exit 1 if one fails.")
def acls_command(config_paths: tuple[str, ...], overrides: tuple[str, ...], principal: str, processes: tuple[str, ...],
                 aggregator: bool, command_config: str | None, output: str, apply: bool) -> None:
    """The ACLs a principal needs for a process with this configuration, and nothing more: as kafka-acls commands
    (each preceded by what needs it and what happens without it), a Markdown table (the README's) or JSON. Nothing
    is applied without --apply."""
    kind, _, name = principal.partition(":")
    if not kind or not name or any(c.isspace() for c in kind):
        fail(f"--principal {principal!r}: expected Type:name, e.g. User:quota-sidecar")
    wanted = [p.strip() for each in processes for p in each.split(",") if p.strip()]
    wanted += [permissions.AGGREGATE] * aggregator
    unknown = [p for p in wanted if p not in permissions.PROCESSES]
    if unknown:
        fail(f"--for {unknown[0]}: expected one of {', '.join(permissions.PROCESSES)}")
    if apply and output != "commands":
        fail(f"-o {output} and --apply: give one of them")
    if apply and not command_config:
        fail("--apply needs --command-config FILE: the client properties of a principal allowed to create ACLs")
    wanted = [p for p in permissions.PROCESSES if p in (wanted or [permissions.RUN])]
    config = load_config(config_paths, overrides, aggregator=wanted == [permissions.AGGREGATE])
    found = permissions.required(config, wanted)
    if apply:
        _apply_acls(acls_text.as_json(found, config, principal), command_config)
    elif output == "table":
        click.echo(acls_text.table(found))
    elif output == "json":
        click.echo(json.dumps(acls_text.as_json(found, config, principal), indent=2))
    else:
        click.echo(acls_text.commands(found, config, principal, wanted, command_config))


def _apply_acls(entries: list[dict], command_config: str) -> None:
    """One line per ACL: created, already there, or why it failed (exit 1)."""
    from ..act.acl_writes import apply
    from ..configuration.admin_client import client_kwargs
    from ..configuration.properties import read_properties

    try:
        admin = client_kwargs({**read_properties(command_config), "bootstrap.servers": entries[0]["bootstrap_servers"]})
    except (ConfigError, OSError) as error:
        fail(f"--command-config {command_config}: {error}")
    try:
        applied = apply(entries, admin)
    except AdminError as error:
        fail(f"nothing applied: {error}", UNREACHABLE)
    for each in applied:
        acl = each.acl
        what = (f"{acl['permission']} {acl['principal']} {acl['operation']} on {acl['resource_type']} "
                f"{acl['resource_name']} ({acl['bootstrap_servers']})")
        click.echo(f"{'created' if each.created else 'failed' if each.error else 'already there'}: {what}"
                   + (f": {each.error}" if each.error else ""))
    if any(each.error for each in applied):
        sys.exit(UNREACHABLE)
