"""One definition per fact: every published number lives in sdpa_ref.published.

Each number the site quotes from outside the project (a paper, a model card, a
GPU guide, another library's default) is defined once, in
:mod:`sdpa_ref.published`, with the citation key(s) of its source in
``SOURCES``; every other module takes it from there (issue 20).
"""

import ast
import re
from pathlib import Path

import pytest

from sdpa_ref import published

ROOT = Path(__file__).parents[2]
PACKAGE = ROOT / "sdpa_ref"
DOCS = ROOT / "docs"
BIBLIOGRAPHY = [DOCS / "references.bib", *(DOCS / "bib").glob("*.bib")]
ENTRY = re.compile(r"^@\w+\s*\{\s*([^,\s]+)\s*,", re.M)


def _constants():
    return {
        name
        for name in vars(published)
        if name.isupper() and not name.startswith("_") and name != "SOURCES"
    }


def _bib_keys():
    return {key for path in BIBLIOGRAPHY for key in ENTRY.findall(path.read_text())}


def test_every_constant_has_a_source_and_every_source_a_constant():
    constants = _constants()
    assert constants, "found no constants in sdpa_ref.published"
    assert sorted(constants - set(published.SOURCES)) == [], "without a source"
    assert sorted(set(published.SOURCES) - constants) == [], "without a constant"


def test_all_lists_every_constant():
    assert set(published.__all__) == _constants() | {"SOURCES"}


def test_every_citation_key_is_in_the_bibliography():
    keys = _bib_keys()
    assert len(keys) > 20, "the bibliography scan found too few entries"
    for name, cited in published.SOURCES.items():
        assert isinstance(cited, tuple), f"{name}: keys must be a tuple"
        assert cited, f"{name}: no citation key"
        missing = sorted(set(cited) - keys)
        assert not missing, f"{name} cites keys not in the bibliography: {missing}"


def _assigned_names(node):
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    for target in targets:
        for sub in ast.walk(target):
            if isinstance(sub, ast.Name):
                yield sub.id


@pytest.mark.parametrize(
    "path",
    sorted(p for p in PACKAGE.glob("*.py") if p.name != "published.py"),
    ids=lambda p: p.name,
)
def test_no_other_module_defines_a_published_number(path):
    """Outside published.py a published name is only imported: a literal, a
    computation or an alias ``NAME = published.NAME`` (with a ``#:`` comment
    that quotes the source a second time) is a second definition."""
    tree = ast.parse(path.read_text())
    defined = [
        f"line {node.lineno}: {name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign)
        for name in _assigned_names(node)
        if name in published.SOURCES
    ]
    assert not defined, f"{path.name} defines published numbers: {defined}"


def test_old_names_are_the_published_objects():
    """The pages' names (sdpa_ref.flash.A100_HBM_GB, ...) are the same objects."""
    import importlib

    found = {}
    for path in sorted(PACKAGE.glob("*.py")):
        if path.name in {"published.py", "__init__.py"}:
            continue
        module = importlib.import_module(f"sdpa_ref.{path.stem}")
        for name in published.SOURCES:
            if name in vars(module):
                assert getattr(module, name) is getattr(published, name), (
                    f"sdpa_ref.{path.stem}.{name}"
                )
                found.setdefault(name, []).append(path.stem)
    # The names the pages have long used are still there (new numbers, such
    # as FLASH_PAPER_SRAM_KB, are read from sdpa_ref.published itself).
    assert {"A100_HBM_GB", "MISTRAL_7B_KV", "TRANSFORMER_D_MODEL"} <= set(found)


def test_each_source_is_quoted_once_beside_its_value():
    """The ``#:`` comment that quotes a number's source stands in one place:
    above its definition in published.py, which the API reference renders.
    (The subject modules only import it, as
    test_no_other_module_defines_a_published_number checks.)"""
    own = (PACKAGE / "published.py").read_text().splitlines()
    documented = set()
    for i, line in enumerate(own):
        name = line.split(" = ")[0]
        quoted = i > 0 and own[i - 1].startswith("#:")
        if quoted and (name in published.SOURCES or name == "SOURCES"):
            documented.add(name)
    assert sorted((set(published.SOURCES) | {"SOURCES"}) - documented) == []
