"""Doctest set-up shared by the package, the README and the pages' prose.

``--doctest-modules`` runs the docstrings of sdpa_ref; Sybil reads the MyST
markdown of README.md and docs/ and runs the ``>>>`` examples in ```python
fences. The executed ``{code-cell}`` blocks are run by the site build instead.
"""

from doctest import ELLIPSIS, NORMALIZE_WHITESPACE

import numpy as np
import pytest
from sybil import Sybil
from sybil.parsers.myst import PythonCodeBlockParser, SkipParser

import sdpa_ref


@pytest.fixture(autouse=True)
def _doctest_names(doctest_namespace):
    doctest_namespace["np"] = np
    doctest_namespace["sdpa_ref"] = sdpa_ref
    for name in sdpa_ref.__all__:
        doctest_namespace[name] = getattr(sdpa_ref, name)


def _sybil_names(namespace):
    namespace.update(np=np, sdpa_ref=sdpa_ref)


pytest_collect_file = Sybil(
    parsers=[
        PythonCodeBlockParser(doctest_optionflags=ELLIPSIS | NORMALIZE_WHITESPACE),
        SkipParser(),
    ],
    patterns=["*.md"],
    excludes=["_build/*", "jupyter_execute/*"],
    setup=_sybil_names,
).pytest()
