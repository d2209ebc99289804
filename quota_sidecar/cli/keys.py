"""`quota-sidecar keys`: every configuration key, its default and meaning."""

from __future__ import annotations

import json

import click

from .grammar import epilog, output_option


@click.command(epilog=epilog("keys", "quota-sidecar keys --filter replication",
                            "quota-sidecar keys --filter 'storage.*.bytes' -o json"))
@click.option("--filter", "pattern", metavar="TEXT",
              help="Only the keys whose name contains TEXT, or matches it as a glob when it has * ? or [ "
                   "(storage.*.bytes).")
@output_option("table", "json")
def keys(pattern: str | None, output: str) -> None:
    """Every configuration key: its default, what it allows, what it means, as a Markdown table (the README's) or
    JSON."""
    from ..configuration.keys import keys_json, keys_table

    click.echo(json.dumps(keys_json(pattern), indent=2) if output == "json" else keys_table(pattern))
