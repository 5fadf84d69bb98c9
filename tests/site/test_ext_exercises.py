"""docs/_ext/exercises: an "Answer" dropdown is named after its exercise."""

import sys
from pathlib import Path

import pytest
from docutils import nodes

sys.path.insert(0, str(Path(__file__).parents[2] / "docs" / "_ext"))
from exercises import exercise_number, name_answers


def paragraph(*children):
    return nodes.paragraph("", "", *children)


@pytest.mark.parametrize(
    ("node", "number"),
    [
        (paragraph(nodes.strong("", "2."), nodes.Text(" Can dividing ...")), "2"),
        (
            paragraph(nodes.Text("  "), nodes.strong("", "12."), nodes.Text(" Why")),
            "12",
        ),
        (paragraph(nodes.strong("", "3"), nodes.Text(" Show")), "3"),
        (paragraph(nodes.Text("See "), nodes.strong("", "2."), nodes.Text(".")), None),
        (paragraph(nodes.strong("", "Note."), nodes.Text(" Not one")), None),
        (paragraph(nodes.strong("", "2.a")), None),
        (paragraph(nodes.emphasis("", "2.")), None),
        (paragraph(), None),
        (nodes.section("", nodes.strong("", "2.")), None),
    ],
)
def test_exercise_number(node, number):
    assert exercise_number(node) == number


def dropdown(title):
    box = nodes.container("", nodes.rubric("", title), nodes.paragraph("", "It is."))
    box["design_component"] = "dropdown"
    box["has_title"] = True
    return box


def test_name_answers_renames_only_answers_that_follow_an_exercise():
    section = nodes.section()
    section += paragraph(nodes.strong("", "4."), nodes.Text(" Why?"))
    section += dropdown("Answer")
    section += paragraph(nodes.Text("Plain prose."))
    section += dropdown("Answer")
    section += paragraph(nodes.strong("", "5."), nodes.Text(" How?"))
    section += dropdown("Hint")
    doctree = nodes.document(None, None)
    doctree += section
    name_answers(None, doctree)
    titles = [box[0].astext() for box in doctree.findall(nodes.container)]
    assert titles == ["Answer to exercise 4", "Answer", "Hint"]
