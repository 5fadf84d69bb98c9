"""Each exercise's answer is named after its exercise.

The pages write an exercise as a paragraph that opens with its number in bold
(``**2.** Can dividing ...``), followed by a collapsed ``{dropdown} Answer``.
A screen reader's list of a page's controls then reads "Answer, Answer,
Answer". When the pages are read, a dropdown titled "Answer" right after such
a paragraph is renamed "Answer to exercise 2"; no page needs editing.
"""

from __future__ import annotations

import re

from docutils import nodes

TITLE = "Answer"
_NUMBER = re.compile(r"(\d+)\.?")


def exercise_number(paragraph) -> str | None:
    """The exercise number a paragraph opens with in bold, or None."""
    if not isinstance(paragraph, nodes.paragraph):
        return None
    # MyST may open the paragraph with an empty text node.
    children = [c for c in paragraph.children if c.astext().strip()]
    first = children[0] if children else None
    if not isinstance(first, nodes.strong):
        return None
    match = _NUMBER.fullmatch(first.astext().strip())
    return match.group(1) if match else None


def name_answers(app, doctree):
    for box in list(doctree.findall(nodes.container)):
        if box.get("design_component") != "dropdown" or not box.get("has_title"):
            continue
        title = box.children[0] if box.children else None
        if not isinstance(title, nodes.rubric) or title.astext().strip() != TITLE:
            continue
        parent = box.parent
        index = parent.index(box)
        number = exercise_number(parent[index - 1]) if index > 0 else None
        if number:
            title.children = [nodes.Text(f"{TITLE} to exercise {number}")]


def setup(app):
    app.connect("doctree-read", name_answers)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
