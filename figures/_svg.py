"""Smaller SVG from matplotlib that draws the same picture.

Matplotlib's SVG spells everything out: each label is a run of glyph outlines
placed one ``<use>`` at a time, each artist repeats its full ``style``, every
group has an ``id``, and every coordinate has six decimals. A figure of two
small line charts came to 40-60 kB, most of it text. This module rewrites the
file without changing what it draws:

* **Text stays text.** Figures are saved with ``svg.fonttype: none``, so a
  label is a ``<text>`` element. The fonts it names (DejaVu Sans, its oblique
  for mathtext, STIX for large radicals) are embedded once per file as WOFF2
  subsets of exactly the characters drawn, so the text renders in the font
  matplotlib measured it with, offline and from an ``<img>``. A mathtext
  label's per-glyph ``<tspan>`` elements become one per run, with the glyphs'
  own x positions as a list.
* **Coordinates to a tenth of a point.** A figure is at most 4.8 in (345.6 pt)
  wide and shown at most at that size, where 0.05 pt is a twentieth of a CSS
  pixel. Path data becomes relative and drops repeated commands, computed
  from rounded absolute points, so no error accumulates along a path.
* **Repeated styles become classes; unused ids, comments, metadata and bare
  groups go.**

Every step is a deterministic function of its input, so two saves of one
figure still give the same bytes.
"""

from __future__ import annotations

import base64
import html
import io
import logging
import re
from functools import cache

from matplotlib import font_manager
from matplotlib.font_manager import FontProperties

_COMMENT = re.compile(r"<!--.*?-->", re.S)
_METADATA = re.compile(r"<metadata>.*?</metadata>", re.S)
_TEXT = re.compile(r'<text style="([^"]*)"([^>]*)>(.*?)</text>', re.S)
_TEXT_GROUP = re.compile(
    r'<g(?: style="([^"]*)")?( transform="[^"]*")><text>(.*?)</text>', re.S
)
_TSPAN = re.compile(
    r'<tspan x="([^"]*)" y="([^"]*)" style="([^"]*)">(.*?)</tspan>', re.S
)
_NO_ROTATION = re.compile(r' transform="rotate\(-?0 [^)]*\)"')
_PATH_DATA = re.compile(r'(\sd=")([^"]*)(")')
_PATH_TOKEN = re.compile(r"[MLQCZHVAmlqczhva]|-?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?")
_NUMBER_ATTR = re.compile(
    r'(\s(?:x|y|x1|y1|x2|y2|cx|cy|r|width|height|transform|points)=")([^"]*)(")'
)
_NUMBER = re.compile(r"-?(?:\d+\.\d*|\.\d+|\d+)(?:e[-+]?\d+)?")
_STYLE_ATTR = re.compile(r'\sstyle="([^"]*)"')
_ID = re.compile(r'\sid="([^"]+)"')
_REF = re.compile(r'(?:url\(#|href="#)([^")]+)')
_TAG = re.compile(r"<(/?)g(\s[^>]*)?>")
_ARGS = {"M": 2, "L": 2, "Q": 4, "C": 6, "Z": 0}


def number(value: float) -> str:
    """A coordinate to a tenth, a small factor to three significant digits.

    >>> [number(v) for v in (168.97, -0.40625, 0.09, 2.0, -0.04)]
    ['169', '-.406', '.09', '2', '-.04']
    """
    if abs(value) >= 1 or value == 0:
        text = f"{value:.1f}"
    else:
        text = f"{value:.3g}"
        if "e" in text:
            text = f"{value:.6f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    text = text.replace("0.", ".", 1) if text.startswith(("0.", "-0.")) else text
    return "0" if text in ("", "-", "-0", "-.") else text


def _numbers(text: str) -> str:
    return _NUMBER.sub(lambda m: number(float(m.group(0))), text)


def path_data(d: str) -> str:
    """Matplotlib path data as relative commands on a tenth-of-a-point grid.

    >>> path_data("M 62.45 168.97 L 64.67 168.5 L 66.9 168.02 z")
    'M62.4 169l2.3-.5 2.2-.5z'
    """
    tokens = [t.upper() if t == "z" else t for t in _PATH_TOKEN.findall(d)]
    if (
        not tokens
        or tokens[0] != "M"
        or any(t.isalpha() and t not in _ARGS for t in tokens)
    ):
        return d  # not matplotlib's absolute M/L/Q/C/Z: leave as is
    out, i, last, pen, start = [], 0, "", (0, 0), (0, 0)
    while i < len(tokens):
        command = tokens[i]
        i += 1
        count = _ARGS[command]
        values = [round(float(v) * 10) for v in tokens[i : i + count]]
        i += count
        if command == "Z":
            out.append("z")
            last, pen = "z", start
            continue
        if command == "M" and not out:
            letter, shown = "M", values  # the first move stays absolute
        else:
            letter = command.lower()
            shown = [v - pen[k % 2] for k, v in enumerate(values)]
        if command == "M":
            start = (values[0], values[1])
        pen = (values[-2], values[-1])
        # A command repeats implicitly; after a move, the repeat is a line
        # (absolute after M, relative after m).
        implicit = letter == last
        out.append(("" if implicit else letter) + _tenths(shown, implicit))
        last = {"M": "L", "m": "l"}.get(letter, letter)
    return "".join(out)


def points(d: str) -> list[tuple[float, float]]:
    """The absolute points of path data, from matplotlib or :func:`path_data`.

    For comparing the two.

    >>> points("M62.4 169l2.3-.5 2.2-.5z")
    [(62.4, 169.0), (64.7, 168.5), (66.9, 168.0)]
    """
    tokens = _PATH_TOKEN.findall(d)
    out, pen, command, i = [], (0.0, 0.0), "M", 0
    while i < len(tokens):
        if tokens[i].isalpha():
            command = tokens[i]
            i += 1
            if command in "Zz":
                continue
        count = _ARGS[command.upper()]
        values = [float(v) for v in tokens[i : i + count]]
        i += count
        if command.islower():
            values = [v + pen[k % 2] for k, v in enumerate(values)]
        out += [
            (round(values[k], 6), round(values[k + 1], 6)) for k in range(0, count, 2)
        ]
        pen = out[-1]
        command = {"M": "L", "m": "l"}.get(command, command)
    return out


def _tenths(values: list[int], after_number: bool) -> str:
    text = ""
    for v in values:
        s = f"{v / 10:g}" if v % 10 else str(v // 10)
        s = s.replace("0.", ".", 1) if s.startswith(("0.", "-0.")) else s
        if text or after_number:
            text += s if s.startswith("-") else " " + s
        else:
            text += s
    return text


def _value(value: str) -> str:
    """A style value with its numbers shortened; colours and names unchanged."""
    if value.startswith("#") or re.search(r"[a-df-zA-Z]", value.replace("px", "")):
        return value
    return _numbers(value)


def _style(style: str) -> dict[str, str]:
    return {
        k.strip(): v.strip()
        for k, v in (d.split(":", 1) for d in style.split(";") if ":" in d)
    }


@cache
def _font_file(family: str, style: str, weight: str) -> str:
    properties = FontProperties(family=family, style=style, weight=weight)
    return font_manager.findfont(properties, fallback_to_default=False)


def _subset(path: str, characters: str) -> bytes:
    from fontTools import subset  # noqa: PLC0415 (matplotlib's own dependency)

    # The subsetter reports every table it touches at INFO.
    logging.getLogger("fontTools").setLevel(logging.WARNING)
    options = subset.Options()
    options.flavor = "woff2"  # needs brotli (the docs group has it)
    options.hinting = False
    options.desubroutinize = True
    options.layout_features = ["kern"]
    options.name_IDs = []
    options.notdef_outline = False
    options.recalc_timestamp = False
    options.drop_tables += ["FFTM"]  # FontForge's timestamps: nothing draws with them
    font = subset.load_font(path, options)
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=sorted({ord(c) for c in characters}))
    subsetter.subset(font)
    out = io.BytesIO()
    subset.save_font(font, out, options)
    font.close()
    return out.getvalue()


class _Text:
    """Text elements as classed ``<text>``, and the fonts they need."""

    def __init__(self):
        self.fonts: dict[str, list] = {}  # font file -> [family name, characters]
        self.rules: dict[str, str] = {}  # declarations -> class

    def cls(self, style: dict[str, str], text: str) -> str:
        family = style.get("font-family", "DejaVu Sans").strip("'\"")
        path = _font_file(
            family,
            style.get("font-style", "normal"),
            style.get("font-weight", "normal"),
        )
        font = self.fonts.setdefault(path, [f"f{len(self.fonts)}", set()])
        font[1].update(html.unescape(text))
        decl = f"font:{_numbers(style['font-size'])} {font[0]}"
        if style.get("text-anchor", "start") != "start":
            decl += f";text-anchor:{style['text-anchor']}"
        if "fill" in style:
            decl += f";fill:{style['fill']}"
        return self.rules.setdefault(decl, f"t{len(self.rules)}")

    def plain(self, match: re.Match) -> str:
        attrs = _NO_ROTATION.sub("", match.group(2))
        body = match.group(3)
        cls = self.cls(_style(match.group(1)), body)
        return f'<text class="{cls}"{attrs}>{body}</text>'

    def mathtext(self, match: re.Match) -> str:
        outer = _style(match.group(1) or "")
        runs: list[list] = []  # [class, y, xs, text]
        for x, y, style, char in _TSPAN.findall(match.group(3)):
            if not char.strip():
                continue  # a space: the next glyph's own x keeps the gap
            cls = self.cls({**outer, **_style(style)}, char)
            if runs and runs[-1][0] == cls and runs[-1][1] == y:
                runs[-1][2].append(x)
                runs[-1][3] += char
            else:
                runs.append([cls, y, [x], char])
        spans = "".join(
            f'<tspan class="{c}" x="{" ".join(number(float(x)) for x in xs)}" '
            f'y="{number(float(y))}">{text}</tspan>'
            for c, y, xs, text in runs
        )
        # The group keeps its style: a fraction bar drawn beside the text uses it.
        style = f' style="{match.group(1)}"' if match.group(1) else ""
        return f"<g{style}{match.group(2)}><text>{spans}</text>"

    def style_sheet(self) -> str:
        faces = "".join(
            f"@font-face{{font-family:{name};src:url(data:font/woff2;base64,"
            f"{base64.b64encode(_subset(path, ''.join(sorted(chars)))).decode()})}}"
            for path, (name, chars) in self.fonts.items()
        )
        return faces + "".join(f".{c}{{{d}}}" for d, c in self.rules.items())


def _classes(svg: str) -> tuple[str, str]:
    """Styles used twice or more as classes; returns the SVG and the rules."""
    counts: dict[str, int] = {}
    for style in _STYLE_ATTR.findall(svg):
        counts[style] = counts.get(style, 0) + 1
    names = {s: f"s{i}" for i, s in enumerate(s for s, n in counts.items() if n > 1)}

    def compact(style: str) -> str:
        return ";".join(f"{k}:{_value(v)}" for k, v in _style(style).items())

    def attribute(match: re.Match) -> str:
        style = match.group(1)
        if style in names:
            return f' class="{names[style]}"'
        return f' style="{compact(style)}"'

    rules = "".join(f".{c}{{{compact(s)}}}" for s, c in names.items())
    return _STYLE_ATTR.sub(attribute, svg), rules


def _ids(svg: str) -> str:
    """Drop ids nothing refers to; give the others short names."""
    referenced = set(_REF.findall(svg))
    defined = [i for i in _ID.findall(svg) if i in referenced]
    short = {name: f"i{n:x}" for n, name in enumerate(dict.fromkeys(defined))}
    svg = _ID.sub(
        lambda m: f' id="{short[m.group(1)]}"' if m.group(1) in short else "", svg
    )
    return _REF.sub(
        lambda m: m.group(0).replace(m.group(1), short.get(m.group(1), m.group(1))), svg
    )


def _unwrap_groups(svg: str) -> str:
    """Remove ``<g>`` elements without attributes, keeping their children."""
    out, stack, pos = [], [], 0
    for match in _TAG.finditer(svg):
        closing, attrs = match.group(1), match.group(2)
        out.append(svg[pos : match.start()])
        pos = match.end()
        if closing:
            if stack.pop():
                out.append(match.group(0))
        else:
            keep = bool(attrs and attrs.strip() and attrs.strip() != "/")
            if attrs and attrs.rstrip().endswith("/"):
                if keep:
                    out.append(match.group(0))
                continue
            stack.append(keep)
            if keep:
                out.append(match.group(0))
    out.append(svg[pos:])
    return "".join(out)


def compact(svg: str) -> str:
    """Matplotlib's SVG (saved with ``svg.fonttype: none``), smaller, same drawing."""
    svg = _METADATA.sub("", _COMMENT.sub("", svg))
    svg = re.sub(r">\s+<", "><", svg)
    text = _Text()
    svg = _TEXT_GROUP.sub(text.mathtext, svg)
    svg = _TEXT.sub(text.plain, svg)
    svg = _PATH_DATA.sub(lambda m: m.group(1) + path_data(m.group(2)) + m.group(3), svg)
    svg = _NUMBER_ATTR.sub(
        lambda m: m.group(1) + _numbers(m.group(2)) + m.group(3), svg
    )
    svg = svg.replace("xlink:href=", "href=").replace(
        ' xmlns:xlink="http://www.w3.org/1999/xlink"', ""
    )
    # Ids first: a hatch is a pattern that a style names in url(#...).
    svg, rules = _classes(_ids(svg))
    svg = _unwrap_groups(svg)
    own = re.search(r'<style type="text/css">(.*?)</style>', svg, re.S)
    base = re.sub(r"\s*([{}:;])\s*", r"\1", own.group(1)) if own else ""
    sheet = f"<style>{base}{rules}{text.style_sheet()}</style>"
    if own:
        return svg[: own.start()] + sheet + svg[own.end() :]
    return re.sub(r"(<svg\b[^>]*>)", lambda m: m.group(1) + sheet, svg, count=1)
