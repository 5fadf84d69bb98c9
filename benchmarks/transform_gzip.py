"""What each of the build's page transforms saves, in bytes a static host sends.

A static host sends HTML gzipped, so a transform pays only if it saves bytes
after gzip. This reads the built site (``nox -s docs`` first), undoes one
transform at a time on every page, and prints, per transform, the gzipped
bytes of all pages with it and without it. Fonts are WOFF2, which a host
sends as they are: their row compares raw bytes. (Writing each root's SVG path
once a page saved 0.2% and was dropped.) ``nox -s bench`` runs it after the
benchmarks; alone: ``python benchmarks/transform_gzip.py [docs/_build/html]``.
"""

from __future__ import annotations

import gzip
import html
import re
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
from katex_prerender import MATHML_NS, short_class_names  # noqa: E402

_KS_RULE = re.compile(r"\.(ks\d+)\{([^}]*)\}")
_KS_CLASS = re.compile(r'(<[a-z]+)([^<>]*?) class="([^"]*)"')


def gz(text: str) -> int:
    return len(gzip.compress(text.encode(), compresslevel=9, mtime=0))


def with_xmlns(page: str) -> str:
    return page.replace("<math", "<math" + MATHML_NS)


def with_inline_styles(page: str) -> str:
    rules = {
        name: ";".join(d.replace("!important", "") for d in body.split(";"))
        for name, body in _KS_RULE.findall(page)
    }
    if not rules:
        return page

    def tag(match: re.Match) -> str:
        classes = match.group(3).split()
        styles = [html.escape(rules[c]) for c in classes if c in rules]
        kept = [c for c in classes if c not in rules]
        attrs = f' class="{" ".join(kept)}"' if kept else ""
        style = f' style="{";".join(styles)}"' if styles else ""
        return f"{match.group(1)}{match.group(2)}{attrs}{style}"

    return _KS_CLASS.sub(tag, page)


def with_long_classes(page: str, names: dict[str, str]) -> str:
    long = {short: name for name, short in names.items()}

    def lengthen(match: re.Match) -> str:
        classes = " ".join(long.get(c, c) for c in match.group(1).split())
        return f'class="{classes}"'

    return re.sub(r'class="([^"]*)"', lengthen, page)


def main() -> None:
    site = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "docs" / "_build" / "html")
    pages = {p: p.read_text(encoding="utf-8") for p in sorted(site.glob("*.html"))}
    katex = Path.home() / ".cache" / "sdpa-ref" / "katex-0.19.1" / "node_modules"
    dist = katex / "katex" / "dist"
    names = short_class_names((dist / "katex.min.css").read_text(encoding="utf-8"))
    undo = {
        "MathML without xmlns": with_xmlns,
        "KaTeX's inline styles as per-page classes": with_inline_styles,
        "KaTeX's class names shortened": lambda p: with_long_classes(p, names),
    }
    now = sum(gz(p) for p in pages.values())
    raw = sum(len(p.encode()) for p in pages.values())
    print(f"{len(pages)} pages: {now:,} bytes gzipped, {raw:,} raw, as built")
    head = f"{'without':>10} {'saves':>9} {'share':>7} {'raw saves':>10}"
    print(f"{'transform':<48} {head}")
    for name, fn in undo.items():
        undone = [fn(p) for p in pages.values()]
        before = sum(gz(p) for p in undone)
        saves = before - now
        raw_saves = sum(len(p.encode()) for p in undone) - raw
        print(
            f"{name:<48} {before:>10,} {saves:>9,} {saves / before:>7.1%} "
            f"{raw_saves:>10,}"
        )
    full = sum(f.stat().st_size for f in (dist / "fonts").glob("*.woff2"))
    cut = sum(f.stat().st_size for f in (site / "_static/katex/fonts").glob("*.woff2"))
    print(
        f"{'KaTeX fonts subset (WOFF2, raw bytes)':<48} {full:>10,} "
        f"{full - cut:>9,} {(full - cut) / full:>7.1%}"
    )


if __name__ == "__main__":
    main()
