"""`quota-sidecar status`: a running sidecar's status, or one read-only poll of the cluster."""

from __future__ import annotations

import json
from datetime import timedelta

import click

from ..common.errors import AdminError, ConfigError
from ..configuration import config as configuration
from .endpoint import DEFAULT_URL, reach
from .grammar import UNREACHABLE, Duration, config_options, epilog, fail, load_config, output_option


@click.command(epilog=epilog("status", "quota-sidecar status",
                            "quota-sidecar status --url https://kafka-0.kafka:8080 -o json",
                            "quota-sidecar status --direct --config server.properties --timeout 30s"))
@config_options
@click.option("--url", help=f"A running sidecar's HTTP endpoint; {DEFAULT_URL}.")
@click.option("--direct", is_flag=True, help="Read the cluster straight away, without asking a sidecar.")
@output_option("table", "json", aliases={"--json": "json"})
@click.option("--timeout", default="5s", show_default=True, type=Duration(bare_seconds=True),
              help="How long to wait for the sidecar's answer, and for each read of the cluster with --direct "
                   "(the aggregator's decision is waited for as a pass does, within poll.timeout).")
def status(config_paths: tuple[str, ...], overrides: tuple[str, ...], url: str | None, direct: bool, output: str,
           timeout: timedelta) -> None:
    """Brokers, log dirs, the throttle factor and the quotas in force, at a glance. When the cluster cannot be
    read, one line on stderr says what could not be reached."""
    from ..serve import status as view

    config = load_config(config_paths, overrides) if (config_paths or overrides or not url) else None
    url, context = reach(url, config)
    timeout = timeout.total_seconds()
    data, why = (None, None) if direct else _status_from_sidecar(url, timeout, context)
    if data is None:
        if config is None:
            fail(f"no sidecar answered at {url} ({why}); give --config to read the cluster instead")
        if why is not None:  # said on stderr: -o json stays clean
            click.echo(f"no sidecar answered at {url} ({why}); reading the cluster instead", err=True)
        try:
            data = _status_from_cluster(config, timeout)
        except ConfigError as error:
            fail(str(error))
        except AdminError as error:
            fail(f"cannot read the cluster: {error}", UNREACHABLE)
    click.echo(json.dumps(data, indent=2) if output == "json" else view.render(data))




def _status_from_sidecar(url: str, timeout: float, context=None) -> tuple[dict | None, str | None]:
    """(the sidecar's status, None), or (None, why it did not answer)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url.rstrip("/") + "/status", timeout=timeout, context=context) as response:
            return json.load(response), None
    except urllib.error.URLError as error:
        return None, str(error.reason)
    except (ConnectionError, TimeoutError) as error:
        return None, str(error) or type(error).__name__
    except ValueError as error:
        return None, f"its answer is not JSON: {error}"


def _status_from_cluster(config: configuration.SidecarConfig, timeout: float) -> dict:
    """One read-only pass (serve/direct_status.look) through the same decision path: nothing is written to the
    cluster and no topic is created; the aggregator is asked once the cluster has been read, so that an unreachable
    cluster is told at once."""
    from ..act.snapshot import utcnow
    from ..serve import status as view
    from ..serve.direct_status import look
    from ..wiring import build_sidecar

    sidecar = build_sidecar(config, measure_network=False, running=False)
    try:
        return view.build(look(sidecar, timeout), utcnow(), mode="direct: no sidecar answered, one poll made now")
    finally:
        sidecar.close()

