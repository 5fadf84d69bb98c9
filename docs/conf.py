"""Sphinx configuration: project, extensions, MyST-NB execution, HTML."""

import sys
import tomllib
from pathlib import Path

import sdpa_ref

HERE = Path(__file__).parent

# -- Project ------------------------------------------------------------------
project = "Scaled dot-product attention"
author = "the sdpa-ref maintainers"
copyright = "2026, the sdpa-ref maintainers"
version = release = sdpa_ref.__version__

# -- Extensions ---------------------------------------------------------------
# Local extensions live in docs/_ext; the project itself is installed by nox.
sys.path.append(str(HERE / "_ext"))
from source_info import git_commit  # docs/_ext is on the path now

# Where to get it: the repository's address is written once, in pyproject.toml;
# the commit is the one being built, so one commit gives the same pages.
sdpa_repository = tomllib.loads((HERE.parent / "pyproject.toml").read_text())[
    "project"
]["urls"]["Source"]
sdpa_commit = git_commit(HERE)
extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinxcontrib.bibtex",
    "sphinx_design",
    "katex_prerender",
    "a11y",
    "page_weight",
    "search_text",
    "citations",
    "exercises",
    "source_info",
]
templates_path = ["_ext/templates"]
html_math_renderer = "katex_prerender"
exclude_patterns = ["_build", "jupyter_execute", "**.ipynb_checkpoints"]
nitpicky = True
# Type fields of the numpy-style docstrings are prose ("array_like, shape
# (..., n_q, d_k)"), not classes, and there is no intersphinx offline; every
# other cross-reference is still checked.
nitpick_ignore_regex = [("py:class", r".*")]
autodoc_member_order = "bysource"
autodoc_typehints = "none"
napoleon_google_docstring = False
napoleon_use_rtype = False
myst_enable_extensions = [
    "dollarmath",
    "amsmath",
    "colon_fence",
    "deflist",
    "attrs_inline",  # [text]{.class}: prose shown only with, or without, controls
]
myst_heading_anchors = 3
# Every attribution cites references.bib where the claim is made; the works
# are listed once, on the References page. Extra files under bib/ are merged in.
bibtex_bibfiles = [
    "references.bib",
    *sorted(
        str(p.relative_to(Path(__file__).parent))
        for p in (Path(__file__).parent / "bib").glob("*.bib")
    ),
]
bibtex_default_style = "sdpa"  # plain, author-year labels, each link once
bibtex_reference_style = "author_year"

# -- MyST-NB execution ----------------------------------------------------------
# Re-execute every page on every build: a notebook cache cannot see a change in
# sdpa_ref. `nox -s docs -- --cached` switches to the cache while writing.
nb_execution_mode = "force"
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_execution_in_temp = True
nb_execution_timeout = 600
nb_merge_streams = True
nb_output_stderr = "warn"

# -- HTML ---------------------------------------------------------------------
html_theme = "furo"
html_title = "Scaled dot-product attention"
# The interactive figure's script and style live with its Python, in figures/.
html_static_path = ["_static", "../figures/static"]
html_css_files = [
    "site.css",
    "sdpa-widget.css",
    "online-softmax.css",
    "mask-explorer.css",
]
html_js_files = [
    ("sdpa-widget.js", {"defer": "defer"}),
    ("online-softmax.js", {"defer": "defer"}),
    ("mask-explorer.js", {"defer": "defer"}),
    ("theme-name.js", {"defer": "defer"}),
    ("reading.js", {"defer": "defer"}),
]
html_favicon = "_static/favicon.svg"
html_last_updated_fmt = None
html_show_sourcelink = False
html_copy_source = False
# source_info adds the repository: a view-source link on each page, at the
# commit built, and a footer link.
html_theme_options = {
    "navigation_with_keys": True,
}
