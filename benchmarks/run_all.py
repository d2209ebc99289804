"""`make bench`: run the disk-protection benchmarks and rewrite their section of docs/benchmarks.md.

    .venv/bin/python benchmarks/run_all.py [NAME ...]

NAME is one of throttle_latency, java_flood, tenant_verdict, poll_cost, zookeeper_poll, spark_decision, memory; without names all of them run. Only
the "## Disk protection" section of docs/benchmarks.md is rewritten (read, replace, write): the other
sections of the file stay as they are, and so do the subsections of benchmarks that did not run, or
failed (their last figures stay, with the date they were measured), or that this script does not run
(aggregation_latency's).
"""

from __future__ import annotations

import re
import sys
import traceback

import java_flood
import memory
import poll_cost
import spark_decision
import tenant_verdict
import throttle_latency
import zookeeper_poll
from common import DOC, SECTION, print_result, write_section

BENCHMARKS = {module.__name__: module for module in (throttle_latency, java_flood, tenant_verdict, poll_cost,
                                                             zookeeper_poll, spark_decision, memory)}

INTRO = """\
Figures for the disk-full protection, from the scripts in `benchmarks/` (`make bench` runs them all and
rewrites this section; each script also runs alone and prints its figures). They are measured on a
shared 2-core machine on which other people's tests run at the same time: every figure comes with the
load average it was measured under; read them as upper bounds for an idle machine."""


def existing_subsections() -> dict[str, str]:
    """"### title" -> its text, from the "## Disk protection" section the file has now."""
    text = DOC.read_text() if DOC.exists() else ""
    section = re.search(rf"^{re.escape(SECTION)}[ \t]*\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    if not section:
        return {}
    parts = re.split(r"^### (.+)\n", section.group(1), flags=re.MULTILINE)
    return {title.strip(): body.strip() for title, body in zip(parts[1::2], parts[2::2])}


def main(names: list[str]) -> int:
    unknown = [name for name in names if name not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark(s) {unknown}; choose from {list(BENCHMARKS)}", file=sys.stderr)
        return 2
    subsections = existing_subsections()
    failed = []
    for name, module in BENCHMARKS.items():
        if names and name not in names:
            continue
        print(f"== {name}", flush=True)
        try:
            result = module.run()
        except Exception:
            traceback.print_exc()
            failed.append(name)
            continue
        print_result(result)
        subsections[result.title] = result.markdown
        # Written after each benchmark: figures already measured survive a later failure or Ctrl-C. Subsections
        # no module here writes (aggregation_latency's, written by hand around its figures) stay, after ours.
        ours = [module.TITLE for module in BENCHMARKS.values()]
        titles = [title for title in ours if title in subsections] + [t for t in subsections if t not in ours]
        write_section("\n\n".join([INTRO, *(f"### {title}\n\n{subsections[title]}" for title in titles)]))
    if failed:
        print(f"failed: {', '.join(failed)}; their subsections keep their previous figures", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
