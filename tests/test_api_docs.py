"""The API pages document every sdpa_ref function that a page calls."""

import ast
import importlib
import inspect
import re
from pathlib import Path

DOCS = Path(__file__).parents[1] / "docs"
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
