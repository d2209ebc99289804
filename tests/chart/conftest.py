"""tests/chart: helm, found once for the session, with its homes in a temp dir (nothing in ~)."""

import pytest

from harness.agents.chart import helm_or_skip


@pytest.fixture(scope="session")
def helm(tmp_path_factory) -> list[str]:
    return helm_or_skip(tmp_path_factory.mktemp("helm-home"))
