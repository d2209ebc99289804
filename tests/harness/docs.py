"""The documentation as the tests read it: README.md's quick-start commands, copied out of its fenced blocks as a
newcomer would, and the site's page generator (docs/gen_pages.py)."""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
# The comment before a fenced block that a test runs: <!-- quick-start: NAME (...) -->
MARK = re.compile(r"<!-- quick-start: (\S+)[^>]*-->\n```\w*\n(.*?)\n```", re.S)


def quick_start(name: str) -> list[list[str]]:
    """The commands of the block marked `quick-start: NAME`, each split as a shell would (comments dropped)."""
    blocks = {found.group(1): found.group(2) for found in MARK.finditer(README.read_text())}
    if name not in blocks:
        raise LookupError(f"README.md has no block marked <!-- quick-start: {name} -->; it has {sorted(blocks)}")
    commands = (shlex.split(line, comments=True) for line in blocks[name].splitlines())
    return [command for command in commands if command]  # a line that is only a comment is no command


def site_pages() -> ModuleType:
    """docs/gen_pages.py, imported without running it (mkdocs-gen-files runs it as __main__)."""
    spec = importlib.util.spec_from_file_location("gen_pages", ROOT / "docs" / "gen_pages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
