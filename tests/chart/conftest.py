"""tests/chart: helm, found once for the session, with its homes in a temp dir (nothing in ~)."""

import os

import pytest

from harness.chart import find_helm


@pytest.fixture(scope="session")
def helm(tmp_path_factory) -> list[str]:
    found = find_helm()
    if not found:
        pytest.skip("helm not found ($HELM, build/tools/bin/helm, PATH): `make test-chart` installs it")
    home = tmp_path_factory.mktemp("helm-home")
    os.environ.update(HELM_CACHE_HOME=str(home / "cache"), HELM_CONFIG_HOME=str(home / "config"),
                      HELM_DATA_HOME=str(home / "data"))
    return [found]
