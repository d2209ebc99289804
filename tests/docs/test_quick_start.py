"""make test-docs: the README's Kubernetes quick start, copied out of it as a newcomer would (its `helm template`
renders what the next command's Bitnami values mount; helm as make test-chart has it), and the site make docs built."""

import subprocess

import click
import pytest
import yaml

from harness.agents.chart import helm_or_skip
from harness.docs import ROOT, quick_start
from quota_sidecar.cli import main


@pytest.fixture(scope="module")
def helm(tmp_path_factory) -> list[str]:
    return helm_or_skip(tmp_path_factory.mktemp("helm-home"))


def test_the_readmes_helm_template_renders_what_bitnamis_values_mount(helm):
    template = next(command for command in quick_start("kubernetes") if command[:2] == ["helm", "template"])
    rendered = subprocess.run([*helm, *template[1:]], cwd=ROOT, capture_output=True, text=True)
    assert rendered.returncode == 0, rendered.stderr
    kinds = {(doc["kind"], doc["metadata"]["name"]) for doc in yaml.safe_load_all(rendered.stdout) if doc}
    bitnami = next(command for command in quick_start("kubernetes") if "bitnamicharts/kafka" in " ".join(command))
    values = yaml.safe_load((ROOT / bitnami[bitnami.index("-f") + 1]).read_text())
    for volume in values["broker"]["extraVolumes"]:
        if "configMap" in volume:
            assert ("ConfigMap", volume["configMap"]["name"]) in kinds, kinds
        if "secret" in volume:
            assert ("Secret", volume["secret"]["secretName"]) in kinds, kinds


def test_the_built_sites_command_line_page_has_every_command():
    """make docs before it (make test-docs does): mkdocs-click's page, the Spark commands loaded by name included."""
    page = ROOT / "build" / "site" / "cli" / "index.html"
    assert page.exists(), f"{page}: not built; run make docs"
    html = page.read_text()
    with click.Context(main) as ctx:
        shown = [name for name in main.list_commands(ctx) if not main.get_command(ctx, name).hidden]  # not aliases
        missing = [name for name in shown if f'id="quota-sidecar-{name}"' not in html]
    assert not missing, f"commands missing from the site's command-line page: {missing}"


def test_the_readmes_make_demo_stalls_the_flood_and_lifts_it_twice():
    """`make demo`, copied out of the README's quick start: the flood stalled and the throttle lifted with the
    aggregator and again after it was killed and restarted, everything handed back (the demo exits 1 otherwise)."""
    commands = quick_start("demo")
    assert commands == [["make", "demo"]], commands
    shown = subprocess.run(commands[0], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert shown.returncode == 0, shown.stdout[-4000:] + shown.stderr[-2000:]
    assert "DEMO FAILED" not in shown.stdout
    assert "after the sidecars' clean-up no quota is left" in shown.stdout, shown.stdout[-4000:]
