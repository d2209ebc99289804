"""`quota-sidecar replication-overrides`: the KIP-73 rates an operator sets through a sidecar's API (and `throttle`,
its old name, for one release)."""

from __future__ import annotations

import json
import os

import click

from .endpoint import DEFAULT_URL, reach
from .grammar import BAD_CONFIGURATION, UNREACHABLE, config_options, deprecated, epilog, fail, load_config, \
    output_option


@click.group("replication-overrides", epilog="\b\nExamples:\n  quota-sidecar replication-overrides get\n"
                                          "  quota-sidecar replication-overrides set 50000000 --autoremove")
def replication_overrides() -> None:
    """Read, set and remove the replication throttle overrides (KIP-73 rates every sidecar applies instead of the
    computed ones) through a sidecar's API. The producer throttle is not set here."""


def override_options(command):
    command = output_option("table", "json")(command)
    command = click.option("--broker", "broker_id", type=int, help="A broker's override instead of the global one.")(command)
    command = click.option("--url", help=f"A sidecar's HTTP endpoint; {DEFAULT_URL}.")(command)
    return config_options(command)


def _call_api(method: str, config_paths, overrides, url, broker_id, output: str, body=None) -> None:
    import urllib.error
    import urllib.request

    config = load_config(config_paths, overrides) if config_paths or overrides else None
    base, context = reach(url, config)
    token = os.environ.get("QUOTA_SIDECAR_API_TOKEN") or (config.api_token if config else "")
    path = "/throttle" if broker_id is None else f"/throttle/{broker_id}"
    request = urllib.request.Request(base.rstrip("/") + path, method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json",
                                              **({"Authorization": f"Bearer {token}"} if token else {})})
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            answer = json.load(response)
    except urllib.error.HTTPError as error:
        fail(f"{method} {path}: HTTP {error.code}: {json.load(error).get('error', error.reason)}",
             UNREACHABLE if error.code >= 500 else BAD_CONFIGURATION)
    except urllib.error.URLError as error:
        fail(f"no sidecar answered at {base}: {error.reason}", UNREACHABLE)
    except (ConnectionError, TimeoutError) as error:
        fail(f"no sidecar answered at {base}: {error or type(error).__name__}", UNREACHABLE)
    click.echo(json.dumps(answer, indent=2) if output == "json" else override_text(answer))


def override_text(answer: dict) -> str:
    """An override's answer as lines of `name: value`: whose, the rate (or none), who changed it last."""
    lines = [f"override: {'global' if answer.get('broker_id') is None else 'broker ' + str(answer['broker_id'])}"]
    if "removed" in answer:
        return "\n".join([*lines, f"removed: {'yes' if answer['removed'] else 'no (there was none)'}"])
    found = answer.get("override") or {}
    lines.append(f"rate: {found['rate']} bytes/s" if "rate" in found else "rate: none (the computed rates apply)")
    lines += [f"{name}: {value}" for name, value in found.items() if name != "rate"]
    lines += [f"changed {name}: {value}" for name, value in (answer.get("changed") or {}).items()]
    return "\n".join(lines)


@replication_overrides.command("get", epilog=epilog(
    "replication-overrides get", "quota-sidecar replication-overrides get",
    "quota-sidecar replication-overrides get --broker 1 -o json"))
@override_options
def override_get(config_paths, overrides, url, broker_id, output) -> None:
    """Show the global override, or one broker's."""
    _call_api("GET", config_paths, overrides, url, broker_id, output)


@replication_overrides.command("set", epilog=epilog(
    "replication-overrides set",
    "QUOTA_SIDECAR_API_TOKEN=... quota-sidecar replication-overrides set 50000000 --autoremove",
    "quota-sidecar replication-overrides set 20000000 --broker 2 --config server.properties"))
@override_options
@click.argument("rate", type=click.IntRange(min=1))
@click.option("--autoremove", is_flag=True, help="Remove the global override once the current moves finish.")
def override_set(config_paths, overrides, url, broker_id, output, rate: int, autoremove: bool) -> None:
    """Set an override RATE in bytes/s (token: QUOTA_SIDECAR_API_TOKEN or api.token of --config)."""
    _call_api("PUT", config_paths, overrides, url, broker_id, output, {"rate": rate, "autoremove": autoremove})


@replication_overrides.command("remove", epilog=epilog(
    "replication-overrides remove", "quota-sidecar replication-overrides remove",
    "quota-sidecar replication-overrides remove --broker 2 --url https://kafka-2.kafka:8080"))
@override_options
def override_remove(config_paths, overrides, url, broker_id, output) -> None:
    """Remove the global override, or one broker's."""
    _call_api("DELETE", config_paths, overrides, url, broker_id, output)


@click.group("throttle", hidden=True, commands=replication_overrides.commands)
@click.pass_context
def throttle(ctx: click.Context) -> None:
    """Deprecated: replication-overrides (its old name, printing JSON as it did)."""
    deprecated("quota-sidecar throttle", "quota-sidecar replication-overrides")
    ctx.meta.setdefault("output alias", "json")

