"""The `quota-sidecar` command: the agent's (run, cleanup, status, replication-overrides, keys, acls), and by name
those that need Spark (aggregate, evaluate, plan, report: spark_jobs/commands.py), loaded only when called so that
the agent never imports pyspark. Each command lives in the module named for it; grammar.py holds what they share."""

from __future__ import annotations

import importlib

import click

from .. import __version__
from . import acls, agent, keys, overrides, status
from .grammar import LOG_LEVEL_HELP, LOG_LEVELS, fail, set_log_level, with_global_options

# Installed with pip install 'quota-sidecar[spark]'; a module of spark_jobs, never imported by the agent.
SPARK_COMMANDS = {"aggregate": "spark_jobs.commands:aggregate", "evaluate": "spark_jobs.commands:evaluate",
                  "plan": "spark_jobs.commands:plan", "report": "spark_jobs.commands:report"}


class Commands(click.Group):
    """The agent's commands, and the Spark commands imported by name when called or listed (click's
    documented lazy subcommands); each with the global options, and a bad value said in one line."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *SPARK_COMMANDS])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in SPARK_COMMANDS:
            command = super().get_command(ctx, name)
        else:
            module, attribute = SPARK_COMMANDS[name].split(":")
            command = getattr(importlib.import_module(module), attribute)
        return command and with_global_options(command)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except click.BadParameter as error:  # one line, as the configuration's bad values
            fail(f"{error.param.opts[-1] if error.param is not None else error.param_hint}: {error.message}")


@click.group(cls=Commands, epilog="\b\nExamples:\n  quota-sidecar status --log-level DEBUG\n"
                                  "  quota-sidecar replication-overrides get -o json\n\n"
                                  "Exit codes: 0 ok; 1 the cluster or a sidecar could not be reached, or a part "
                                  "failed; 2 bad configuration or usage. Each command's --help lists its own.")
@click.version_option(__version__, prog_name="quota-sidecar")
@click.option("--log-level", default="INFO", show_default=True, type=LOG_LEVELS,
              help=LOG_LEVEL_HELP + " Before or after the subcommand.")
def main(log_level: str) -> None:
    """A sidecar beside every Kafka broker: disk-full protection and replication throttles."""
    set_log_level(log_level)


for command in (agent.run, agent.cleanup, status.status, overrides.replication_overrides, overrides.throttle,
                keys.keys, acls.acls_command):
    main.add_command(command)
