"""The house rule: data flows from sdpa_ref outwards, never back."""

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[2] / "sdpa_ref"
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


@pytest.mark.parametrize(
    "path",
    sorted([*PACKAGE.glob("*.py"), *(PACKAGE.parent / "figures").glob("*.py")]),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_no_module_imports_another_modules_private_names(path):
    """A leading underscore means "this module's own": what another module
    needs is public in the module that defines it (issue 20)."""
    tree = ast.parse(path.read_text())
    private = [
        f"from {'.' * node.level}{node.module or ''} import {alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level
        for alias in node.names
        if alias.name.startswith("_")
    ]
    assert not private, f"{path.name}: {private}"


def test_importing_sdpa_ref_pulls_in_numpy_and_nothing_else():
    code = (
        "import sys; before = set(sys.modules); import sdpa_ref; "
        "new = {m.split('.')[0] for m in set(sys.modules) - before}; "
        "print(sorted(new - set(sys.stdlib_module_names)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=PACKAGE.parent,
    )
    assert result.stdout.strip() == "['numpy', 'sdpa_ref']"


def test_the_wheel_is_the_oracle_alone():
    config = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())
    assert config["tool"]["setuptools"]["packages"] == ["sdpa_ref"]
    assert config["project"]["dependencies"] == ["numpy>=1.26"]
    assert (PACKAGE / "py.typed").exists()
    assert "MIT License" in (PACKAGE.parent / "LICENSE").read_text()
