"""The site's pages made from the code at build time (mkdocs-gen-files runs this in `make docs`): the configuration
reference from the key table, the command line by mkdocs-click from the click commands, the ACL table of
least-privilege.md from `quota-sidecar acls -o table`, and the changelog from CHANGELOG.md."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import click
from click.testing import CliRunner

from quota_sidecar.cli import main
from quota_sidecar.configuration.keys import ADMIN_KEYS_DOC, KEYS
from quota_sidecar.configuration.properties import PREFIX
from quota_sidecar.decide.acls import AGGREGATE, PROCESSES

ROOT = Path(__file__).resolve().parents[1]
ACL_TABLE_MARK = "<!-- the ACL table: docs/gen_pages.py -->"

# The features, in the order an operator meets them: a key belongs to the first whose prefixes it starts with.
FEATURES = (
    ("The cluster watched", "How the sidecar reaches its cluster and its broker.",
     ("kafka.admin.", "broker.id", "poll.timeout")),
    ("Disk-full protection", "The limits that throttle producers, the descent before them, and the polls.",
     ("storage.per.volume.", "storage.fill.window", "storage.check.interval", "storage.cordon.", "storage.cancel.")),
    ("The local watch", "Each sidecar's own sampling of its broker's log dirs, faster than a poll.",
     ("storage.local.",)),
    ("Client quotas", "What is written per principal, and who is never throttled.",
     ("produce", "fetch", "request", "excluded.principal.name.list", "sidecar.")),
    ("When polls fail", "The throttle factor's timeline: its last valid value, then the fallback.",
     ("throttle.factor.",)),
    ("Covering an agent that is down", "Heartbeats, and the live agent that watches a silent one's broker.",
     ("cover.",)),
    ("ZooKeeper mode and the records", "Kafka 3.x with ZooKeeper, and where the sidecars keep their records.",
     ("zookeeper.", "state.store")),
    ("The pipeline and the aggregator", "The topics between the agents and the one aggregator, and its Spark.",
     ("pipeline.", "spark.url", "aggregator.")),
    ("History and the capacity report", "What the aggregator keeps for `quota-sidecar report`.",
     ("history.",)),
    ("The HTTP endpoint", "Metrics, status, probes and the override API.",
     ("http.", "api.token")),
    ("Replication throttles", "KIP-73 throttles set from each broker's free network capacity.",
     ("replication.",)),
    ("Tiered storage", "KIP-956's remote log manager quotas.",
     ("remote.",)),
)
# When a key must be given; every other key may be left out.
REQUIRED = {
    "kafka.admin.bootstrap.servers": "yes (the aggregator: this or `pipeline.bootstrap.servers`)",
    "storage.per.volume.limit.min.available.bytes": "this or the ratio, while `storage.check.interval` is not PT0S "
                                                    "(not by the aggregator)",
    "storage.per.volume.limit.min.available.ratio": "this or the bytes, likewise",
    "broker.id": "for replication throttles and cordons (else read from the broker's file)",
    "zookeeper.connect": "with `state.store=zookeeper`",
    "history.location": "with `aggregator.metrics.port`",
    "http.tls.cert.file": "with `http.tls.key.file`",
    "http.tls.key.file": "with `http.tls.cert.file`",
    "produce": "with a soft limit",
}


def feature_of(name: str) -> str:
    for title, _, prefixes in FEATURES:
        if any(name.startswith(prefix) for prefix in prefixes):
            return title
    raise ValueError(f"{name}: no feature in docs/gen_pages.py's FEATURES names it")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


INTRO = f"""# Configuration

Every key the sidecar reads, generated from its key table (`quota_sidecar/configuration/keys.py`): `quota-sidecar
keys` prints the same. Each key starts with `{PREFIX}` (the Strimzi plugin's keys where they overlap); `--set
KEY=VALUE` may leave the prefix out; each key's type says what it accepts. Keys outside the prefix are
ignored, except `node.id` / `broker.id` and `log.dirs`, which tell a sidecar reading its broker's `server.properties`
which broker it sits beside and what to watch. A value the sidecar cannot use stops it at start with one line naming
the key.
"""
ADMIN_KEYS = """`kafka.admin.*` accepts the Java admin client's `bootstrap.servers`, `security.protocol` (`PLAINTEXT`, `SSL`,
`SASL_PLAINTEXT`, `SASL_SSL`), `sasl.mechanism` (`PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`), `sasl.jaas.config`
(Plain/Scram login modules), `ssl.truststore.location` / `ssl.keystore.location` with `ssl.*.type=PEM`,
`ssl.key.password`, `ssl.endpoint.identification.algorithm`, `client.id`, `request.timeout.ms`, `retry.backoff.ms`,
`reconnect.backoff(.max).ms`, `metadata.max.age.ms`, `connections.max.idle.ms`, `send/receive.buffer.bytes`, and
kafka-python's own PEM keys `ssl.cafile`, `ssl.certfile`, `ssl.keyfile`, `ssl.crlfile`. Anything else (JKS stores,
GSSAPI, OAUTHBEARER) is refused at start with the key named. Passwords, JAAS configs and tokens never appear in logs,
status or errors (`******`).
"""


def configuration_page() -> str:
    """Every key of quota_sidecar/configuration/keys.py, grouped by feature: name, type, default, required, meaning."""
    rows = [(name, "the list below" if allowed == "see below" else allowed, "none" if default == "required" else
             default, doc) for name, default, allowed, doc in ADMIN_KEYS_DOC]
    rows += [(key.name, key.allowed, key.shown_default(), key.doc) for key in KEYS]
    grouped: dict[str, list[tuple[str, str, str, str]]] = {title: [] for title, _, _ in FEATURES}
    for row in rows:
        grouped[feature_of(row[0])].append(row)
    lines = [INTRO]
    for title, intro, _ in FEATURES:
        lines += [f"## {title}", "", intro, "", "| key | type | default | required | meaning |", "|---|---|---|---|---|"]
        lines += [f"| `{name}` | {_cell(allowed)} | {_cell(default)} | {_cell(REQUIRED.get(name, 'no'))} | "
                  f"{_cell(doc)} |" for name, allowed, default, doc in grouped[title]]
        lines += ["", ADMIN_KEYS] if title == FEATURES[0][0] else [""]
    return "\n".join(lines)


CLI_MODULE = "quota_sidecar_commands"  # what cli.md's mkdocs-click block imports: every_command()'s group
CLI_PAGE = f"""# Command line

Every command of `quota-sidecar`, its options and their defaults, generated from the code by mkdocs-click when the
site is built: what `quota-sidecar COMMAND --help` prints. `aggregate`, `evaluate`, `plan` and `report` need the
Spark extra (`pip install 'quota-sidecar[spark]'`); the agent's commands do not.

::: mkdocs-click
    :module: {CLI_MODULE}
    :command: main
    :prog_name: quota-sidecar
    :depth: 1
    :style: table
    :list_subcommands: true
"""


def every_command() -> click.Group:
    """`quota-sidecar` with every command it lists loaded: mkdocs-click documents a group's `commands` when it has
    any, and would leave out the Spark commands that the cli package's group loads by name only when called."""
    with click.Context(main) as ctx:
        commands = {name: main.get_command(ctx, name) for name in main.list_commands(ctx)}
    return click.Group(main.name, commands, params=main.params, help=main.help, epilog=main.epilog,
                       context_settings=main.context_settings)


def acl_table() -> str:
    """The ACLs of every process, one principal each, with replication throttles, a local watch and the pipeline
    on a cluster of its own: `quota-sidecar acls -o table`, as the chart's NOTES table is made (Makefile's
    CHART_ACLS)."""
    settings = ["kafka.admin.bootstrap.servers=kafka-1:9092,kafka-2:9092",
                "storage.per.volume.limit.min.available.bytes=5368709120", "broker.id=1",
                "replication.capacity.bytes.per.second=100000000", "storage.local.log.dirs=/var/lib/kafka/data",
                "pipeline.bootstrap.servers=pipeline:9092"]
    tables = []
    for process in PROCESSES:
        arguments = ["acls", "--principal", "User:quota-sidecar", "-o", "table", "--for", process]
        arguments += ["--aggregator"] * (process == AGGREGATE)
        result = CliRunner().invoke(main, [*arguments, *(item for s in settings for item in ("--set", s))])
        if result.exit_code != 0:
            raise RuntimeError(f"quota-sidecar {' '.join(arguments)}: exit {result.exit_code}: {result.output}")
        tables.append(result.output.strip().splitlines())
    return "\n".join([*tables[0], *(line for table in tables[1:] for line in table[2:])])


def least_privilege_page(prose: str) -> str:
    if ACL_TABLE_MARK not in prose:
        raise ValueError(f"docs/least-privilege.md: no line {ACL_TABLE_MARK!r} where the ACL table goes")
    return prose.replace(ACL_TABLE_MARK, acl_table())


def write_pages() -> None:
    import mkdocs_gen_files

    module = ModuleType(CLI_MODULE)
    module.main = every_command()
    sys.modules[CLI_MODULE] = module
    pages = {"configuration.md": configuration_page(), "cli.md": CLI_PAGE,
             "least-privilege.md": least_privilege_page((ROOT / "docs" / "least-privilege.md").read_text()),
             "changelog.md": (ROOT / "CHANGELOG.md").read_text()}
    for name, text in pages.items():
        with mkdocs_gen_files.open(name, "w") as page:
            page.write(text)


if __name__ == "<run_path>":  # as mkdocs-gen-files runs it (runpy.run_path)
    write_pages()
