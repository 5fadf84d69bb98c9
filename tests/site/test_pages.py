"""The pages: thin, every number glued, every figure described."""

import ast
import builtins
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).parents[2] / "docs"
PAGES = sorted(
    p
    for p in DOCS.glob("*.md")
    if p.name != "references.md" and not p.name.startswith("api")
)
CELL = re.compile(r"```\{code-cell\}[^\n]*\n(.*?)```", re.S)
ARITHMETIC = (
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.FloorDiv,
    ast.Pow,
    ast.MatMult,
    ast.Mod,
)
WORKED_NUMBERS = ("0.444", "0.888", "0.867", "0.657", "1.386", "22.6")


def cells(page):
    for block in CELL.findall(page.read_text()):
        code = "\n".join(
            line for line in block.splitlines() if not line.startswith(":tags:")
        )
        yield ast.parse(code)


def prose(page):
    text = CELL.sub("", page.read_text())
    text = re.sub(r"```python\n.*?```", "", text, flags=re.S)  # doctested examples
    return text


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_pages_compute_nothing_themselves(page):
    for tree in cells(page):
        for node in ast.walk(tree):
            if isinstance(node, ast.BinOp | ast.AugAssign):
                assert not isinstance(node.op, ARITHMETIC), (
                    f"{page.name}: arithmetic in a page, line {node.lineno}: "
                    f"move it into sdpa_ref"
                )


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_worked_numbers_are_glued_not_typed(page):
    text = prose(page)
    for number in WORKED_NUMBERS:
        assert not re.search(rf"(?<![\d.]){re.escape(number)}(?!\d)", text), (
            f"{page.name} types {number}; glue it from sdpa_ref"
        )


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_glued_key_is_defined_and_used(page):
    source = page.read_text()
    defined = set(re.findall(r'glue\("([a-z0-9_]+)"', source))
    used = set(re.findall(r"\{glue:(?:text|md)\}`([a-z0-9_]+)", source))
    # ``{glue}`` alone places an HTML output, as the mask explorer's fallback.
    used |= set(re.findall(r"```\{glue(?::(?:figure|math|md))?\} ([a-z0-9_]+)", source))
    assert used <= defined, f"{page.name} uses undefined keys {used - defined}"
    assert defined <= used, f"{page.name} glues keys it never shows {defined - used}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_figure_has_alt_text_and_a_caption(page):
    source = page.read_text()
    for block in re.findall(r"```\{glue:figure\}.*?```", source, re.S):
        assert re.search(r"^:alt: \S.{40,}", block, re.M), block[:60]
        caption = block.split("\n\n", 1)
        assert len(caption) == 2
        assert caption[1].strip("`\n ")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_skeleton(page):
    headings = re.findall(r"^## (.+)$", page.read_text(), re.M)
    assert headings[0] == "What you will learn"
    assert headings[-1] == "What to read next"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_pages_have_a_jupytext_header(page):
    assert page.read_text().startswith("---\njupytext:\n")


ANSWER = re.compile(r"^:::\{dropdown\} Answer\n(.*?)^:::$", re.S | re.M)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_page_ends_with_exercises_and_computed_answers(page):
    """2-4 exercises before "What to read next"; each answer is collapsed and
    shows the sdpa_ref call that computes it as a doctest (run by Sybil)."""
    source = page.read_text()
    headings = re.findall(r"^## (.+)$", source, re.M)
    assert headings[-2:] == ["Exercises", "What to read next"], headings
    section = source.split("\n## Exercises\n", 1)[1].split("\n## What to read next")[0]
    answers = ANSWER.findall(section)
    assert 2 <= len(answers) <= 4, f"{page.name}: {len(answers)} answers"
    for answer in answers:
        assert re.search(r"```python\n>>> .*sdpa_ref", answer, re.S), answer[:80]


def _unbound_names(code):
    """Names a block of code reads without importing or assigning them first."""
    tree = ast.parse(code)
    bound = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.Lambda):
            args = node.args
            params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
            params += [a for a in (args.vararg, args.kwarg) if a is not None]
            bound |= {a.arg for a in params}
            if isinstance(node, ast.FunctionDef):
                bound.add(node.name)
    return {
        node.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
    } - bound


@pytest.mark.parametrize(
    "page", [*PAGES, DOCS.parent / "README.md"], ids=lambda p: p.name
)
def test_every_doctest_block_runs_on_its_own(page):
    """A reader copies one block: it must import what it uses, since the
    doctest runner shares names between the blocks of a page."""
    for block in re.findall(r"```python\n(.*?)```", page.read_text(), re.S):
        code = "\n".join(
            line[4:] for line in block.splitlines() if line.startswith((">>> ", "... "))
        )
        assert not _unbound_names(code), (page.name, _unbound_names(code), code[:120])
