"""The ACL table in the chart's NOTES (charts/quota-sidecar/files/acls.md) is what `quota-sidecar acls` prints
today with the arguments of the Makefile's CHART_ACLS: `make chart-acls` writes it again."""

import re
import shlex
from pathlib import Path

from click.testing import CliRunner

from quota_sidecar.cli import main

ROOT = Path(__file__).resolve().parents[2]


def chart_acls_arguments() -> list[str]:
    makefile = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    return shlex.split(re.search(r"^CHART_ACLS := (.*)$", makefile, re.MULTILINE).group(1))


def test_the_charts_acl_table_is_what_the_acls_command_prints():
    printed = CliRunner().invoke(main, ["acls", *chart_acls_arguments()])
    assert printed.exit_code == 0, printed.output
    committed = (ROOT / "charts" / "quota-sidecar" / "files" / "acls.md").read_text()
    assert committed == printed.output, "charts/quota-sidecar/files/acls.md is out of date: `make chart-acls`"
