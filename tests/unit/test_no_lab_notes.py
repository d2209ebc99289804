"""No lab notes in the product: comments, docstrings and the README say why, and leave dates, commit hashes and the
project's issue numbers to docs/benchmarks.md and CHANGELOG.md, where they stay true.

Only comments (tokenize) and docstrings (ast) of the code are read: a string literal that is data, such as a fixed
clock in a test, is no note. Upstream tickets (KIP-73, KAFKA-1546, SPARK-55271) are references, not notes.
"""

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CODE = ("quota_sidecar", "spark_jobs", "tests")

# A commit hash, told from other hex words without asking git (a fresh or shallow clone may not know it): 7 to 40
# hex characters holding both a digit and a letter.
_HASH = r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b"
_DATE = r"\b20\d\d-[01]\d-[0-3]\d\b"
_ISSUE = r"\bissues? #?\d+\b"
LAB_NOTE = re.compile(f"{_HASH}|{_DATE}|{_ISSUE}", re.IGNORECASE)


def _docstrings(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                yield body[0].lineno, body[0].value.value


def notes_in_python(source: str) -> list[tuple[int, str]]:
    """(line, note) for each lab note in the comments and docstrings of one module's source."""
    prose = [(token.start[0], token.string) for token in tokenize.generate_tokens(io.StringIO(source).readline)
             if token.type == tokenize.COMMENT]
    for first, text in _docstrings(ast.parse(source)):
        prose.extend((first + offset, line) for offset, line in enumerate(text.splitlines()))
    return sorted((line, match.group()) for line, text in prose for match in LAB_NOTE.finditer(text))


def notes_in_text(text: str) -> list[tuple[int, str]]:
    return [(number, match.group()) for number, line in enumerate(text.splitlines(), 1)
            for match in LAB_NOTE.finditer(line)]


def _found(path: Path, notes: list[tuple[int, str]]) -> list[str]:
    return [f"{path.relative_to(ROOT)}:{line}: {note}" for line, note in notes]


def test_the_detector_finds_a_lab_note_in_a_comment_and_leaves_data_alone():
    source = ('"""The local verdict (issue 19)."""\n'
              'AT = "2026-11-28T17:32:00Z"  # the seed-2 soak, 2026-11-28, at 1bbf6ea\n'
              'TICKETS = ("KIP-73", "KAFKA-1546")  # KIP-73 is upstream; deadbeef and 1000000 are no hashes\n')
    assert notes_in_python(source) == [(1, "issue 19"), (2, "1bbf6ea"), (2, "2026-11-28")]


def test_no_lab_notes_in_the_comments_and_docstrings_of_the_code():
    found = [entry for top in CODE for path in sorted((ROOT / top).rglob("*.py"))
             for entry in _found(path, notes_in_python(path.read_text()))]
    assert found == [], "lab notes belong in docs/benchmarks.md or CHANGELOG.md:\n" + "\n".join(found)


def test_no_lab_notes_in_the_readme():
    readme = ROOT / "README.md"
    found = _found(readme, notes_in_text(readme.read_text()))
    assert found == [], "lab notes belong in docs/benchmarks.md or CHANGELOG.md:\n" + "\n".join(found)
