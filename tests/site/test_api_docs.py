"""The API pages document every sdpa_ref function that a page calls."""

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).parents[2] / "docs"
CODE = re.compile(r"```(?:\{code-cell\}[^\n]*|python)\n(.*?)```", re.S)


def _resolve(dotted):
    """The object a dotted name such as ``sdpa_ref.flash.trace`` names, or None."""
    parts = dotted.split(".")
    obj = importlib.import_module(parts[0])
    for part in parts[1:]:
        if not hasattr(obj, part):
            return None
        obj = getattr(obj, part)
    return obj


def _canonical(obj):
    return f"{obj.__module__}.{obj.__qualname__}"


def _calls(source):
    """Every callable of sdpa_ref that the code blocks of a page name."""
    for block in CODE.findall(source):
        code = "\n".join(
            line.removeprefix(">>> ").removeprefix("... ")
            for line in block.splitlines()
            if not line.startswith(":tags:")
            and (line.startswith((">>>", "...")) or ">>>" not in block)
        )
        tree = ast.parse(code)
        aliases = {"sdpa_ref": "sdpa_ref"}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "sdpa_ref":
                for name in node.names:
                    aliases[name.asname or name.name] = f"sdpa_ref.{name.name}"
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "sdpa_ref."
            ):
                for name in node.names:
                    aliases[name.asname or name.name] = f"{node.module}.{name.name}"
        for top in ast.walk(tree):
            chain, node = [], top
            while isinstance(node, ast.Attribute):
                chain.append(node.attr)
                node = node.value
            if isinstance(node, ast.Name) and node.id in aliases:
                dotted = ".".join([aliases[node.id], *reversed(chain)])
                obj = _resolve(dotted)
                if (
                    callable(obj)
                    and not inspect.ismodule(obj)
                    and (getattr(obj, "__module__", None) or "").startswith("sdpa_ref")
                ):
                    yield _canonical(obj)


def _documented():
    api = "\n".join(p.read_text() for p in sorted(DOCS.glob("api*.md")))
    names = set()
    for target in re.findall(r"\.\. auto(?:function|class)::\s+(\S+)", api):
        names.add(_canonical(_resolve(target)))
    for module_name, members in re.findall(
        r"\.\. automodule::\s+(\S+)\n((?:\s+:[a-z-]+:.*\n)*)", api
    ):
        module = importlib.import_module(module_name)
        listed = re.search(r":members:(.*)", members)
        if listed is None:
            continue
        wanted = [m.strip() for m in listed.group(1).split(",") if m.strip()]
        listed_out = re.search(r":exclude-members:(.*)", members)
        excluded = (
            {m.strip() for m in listed_out.group(1).split(",")} if listed_out else set()
        )
        for name, obj in vars(module).items():
            if (wanted and name not in wanted) or name in excluded:
                continue
            if name.startswith("_") or not callable(obj):
                continue
            if getattr(obj, "__module__", None) == module_name and obj.__doc__:
                names.add(_canonical(obj))
    return names


def test_every_function_a_page_calls_is_on_the_api_page():
    pages = sorted(DOCS.glob("*.md"))
    used = {name for page in pages for name in _calls(page.read_text())}
    assert used, "found no sdpa_ref calls at all: the scan is broken"
    missing = sorted(used - _documented())
    assert not missing, f"docs/api.md does not document {missing}"


@pytest.mark.slow
def test_no_constant_renders_as_a_type():
    """Napoleon reads ``word: rest`` on a constant's first line as "TYPE: rest"."""
    from sphinx.ext.napoleon import Config
    from sphinx.ext.napoleon.docstring import NumpyDocstring
    from sphinx.pycode import ModuleAnalyzer

    api = "\n".join(p.read_text() for p in sorted(DOCS.glob("api*.md")))
    modules = set(re.findall(r"\.\. automodule::\s+(\S+)", api))
    config = Config(napoleon_google_docstring=False)
    typed = []
    for module in sorted(modules):
        for (owner, name), lines in (
            ModuleAnalyzer.for_module(module).find_attr_docs().items()
        ):
            rendered = str(NumpyDocstring(list(lines), config, what="data", name=name))
            if not owner and ":type:" in rendered:
                typed.append(f"{module}.{name}")
    assert len(modules) >= 10
    assert not typed, f"these constants render as 'TYPE: ...': {typed}"


ROOT = DOCS.parent
DOTTED = re.compile(r"\bsdpa_ref(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
FROM_IMPORT = re.compile(r"from (sdpa_ref(?:\.\w+)*) import (?:\(([^)]*)\)|([\w ,]+))")


def test_the_face_is_small():
    import sdpa_ref

    assert len(sdpa_ref.__all__) <= 15
    assert {"attention", "attention_backward", "testing"} <= set(sdpa_ref.__all__)


def test_every_sdpa_ref_name_in_pages_figures_and_tests_exists():
    """A call site of a name that left the top level fails here, by name."""
    files = [
        *DOCS.glob("*.md"),
        ROOT / "README.md",
        *(ROOT / "figures").glob("*.py"),
        *(ROOT / "tests").rglob("*.py"),
        *(ROOT / "benchmarks").glob("*.py"),
    ]
    missing = set()
    for path in files:
        text = path.read_text()
        for dotted in DOTTED.findall(text):
            parts = dotted.split(".")
            # A dotted name may run on into a method of the object it names.
            if all(
                _resolve(".".join(parts[:n])) is None for n in range(2, len(parts) + 1)
            ):
                missing.add(f"{path.name}: {dotted}")
        for module, listed, names in FROM_IMPORT.findall(text):
            for name in (
                n.split(" as ")[0].strip() for n in (listed or names).split(",")
            ):
                if name and _resolve(f"{module}.{name}") is None:
                    missing.add(f"{path.name}: from {module} import {name}")
    assert not missing, sorted(missing)
