"""The house rule: data flows from sdpa_ref outwards, never back."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[1] / "sdpa_ref"
FORBIDDEN = {"figures", "matplotlib", "IPython", "myst_nb", "sphinx", "scipy", "torch"}


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("*.py")), ids=lambda p: p.name)
def test_sdpa_ref_imports_numpy_only(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots = {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            roots = {node.module.split(".")[0]}
        else:
            continue
        assert not roots & FORBIDDEN, f"{path.name} imports {roots & FORBIDDEN}"
