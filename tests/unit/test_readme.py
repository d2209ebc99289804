"""README.md as a front page: short enough to read in minutes, its five behaviours that surprise an operator each
with a link, its links pointing at files that exist, its quick start marked for the test that runs it."""

import re

from markdown.extensions.toc import slugify

from harness.docs import README, quick_start

TEXT = README.read_text()


def test_the_readme_is_at_most_250_lines():
    assert len(TEXT.splitlines()) <= 250, "README.md is a front page: move the detail into docs/"


def test_what_you_must_know_has_five_behaviours_each_with_a_link():
    box = TEXT.split("> **What you must know**", 1)[1].split("\n\n", 1)[0]
    items = re.split(r"\n> \d\. ", "\n" + box)[1:]
    assert len(items) == 5, box
    assert all(re.search(r"\]\([^)]+\)", item) for item in items), box


def test_every_relative_link_points_at_a_file_of_the_repository():
    """Read on a forge, not on the site: a page made at build time (docs/gen_pages.py) is no file to link to."""
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", TEXT)
    missing = [link for link in links if not link.startswith("http") and not (README.parent / link).exists()]
    assert links and not missing, f"README.md links to files that are not there: {missing}"


def test_every_link_to_a_heading_finds_it_as_the_site_names_it():
    links = re.findall(r"\]\(([^)#:]+\.md)#([^)]+)\)", TEXT)
    missing = [f"{page}#{anchor}" for page, anchor in links
               if anchor not in {slugify(heading, "-") for heading in
                                 re.findall(r"^#+ (.+)$", (README.parent / page).read_text(), re.M)}]
    assert links and not missing, f"README.md links to headings that are not there: {missing}"


def test_the_kubernetes_quick_start_starts_with_helm_template():
    commands = quick_start("kubernetes")
    assert commands[0][:3] == ["helm", "template", "quota-sidecar"], commands
