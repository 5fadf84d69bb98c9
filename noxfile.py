"""Sessions a maintainer runs: tests, doctests, docs, lint, serve, parity, bench."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import nox

nox.needs_version = ">=2025.2.9"
nox.options.default_venv_backend = "venv"
nox.options.sessions = ["lint", "tests"]

ROOT = Path(__file__).parent
PYPROJECT = nox.project.load_toml(ROOT / "pyproject.toml")
DOCS_SRC = ROOT / "docs"
DOCS_OUT = DOCS_SRC / "_build" / "html"


def group(name: str) -> list[str]:
    return list(nox.project.dependency_groups(PYPROJECT, name))


def git(*args: str) -> str:
    """What a git command run in the checkout prints, stripped."""
    return subprocess.run(
        ["git", *args], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.strip()


def build_env() -> dict[str, str]:
    """Environment that makes a build depend on the commit alone."""
    try:
        epoch = git("log", "-1", "--format=%ct")
    except (OSError, subprocess.CalledProcessError):
        epoch = ""
    return {
        # figures/ is not in the wheel: the pages' kernels import it from here.
        "PYTHONPATH": str(ROOT),
        "SOURCE_DATE_EPOCH": epoch or "0",
        "PYTHONHASHSEED": "0",
        "MPLBACKEND": "Agg",
        # The pages' NumPy work is many small matrix products. On two shared
        # cores, BLAS threads wait on each other: the training page's
        # experiment took 13 ms a step at d_k = 256 with one thread and 35 to
        # 120 ms with two, under load. One thread keeps it inside 30 s.
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
    }


def sphinx_build(session, src: Path, out: Path, *options: str, env=None) -> None:
    """Build the HTML site, failing on any warning.

    Doctrees go beside the site, not into it: they are pickles with absolute
    paths, which would make two builds differ and weigh down the upload.
    """
    session.run(
        "sphinx-build",
        "-W",
        "--keep-going",
        "-n",
        "-b",
        "html",
        "-d",
        str(out / "doctrees"),
        *options,
        str(src),
        str(out / "html"),
        env=env or build_env(),
    )


def run_pytest(session, *args: str, **extra_env: str) -> None:
    """pytest with these arguments, then the session's, in the build environment."""
    session.run("pytest", *args, *session.posargs, env=build_env() | extra_env)


@nox.session
def tests(session: nox.Session) -> None:
    """Unit, property and doctests, prose doctests, and the site in Chromium.

    The site is built once, afresh, into docs/_build/html (as ``nox -s docs``
    does), and the browser tests drive Debian's chromium against that build.
    They skip, saying how to install it, where it is missing; REQUIRE_BROWSER=1
    (as in CI) makes that a failure. SDPA_SITE=<folder> tests a site built
    before instead of building one.
    """
    session.install("-e", ".", *group("test"), *group("docs"))
    site = os.environ.get("SDPA_SITE")
    if not site:
        shutil.rmtree(DOCS_SRC / "_build", ignore_errors=True)
        sphinx_build(session, DOCS_SRC, DOCS_SRC / "_build", "-q")
        site = str(DOCS_OUT)
    run_pytest(session, SDPA_SITE=site)


@nox.session
def doctests(session: nox.Session) -> None:
    """The worked examples only: the pages' >>> blocks, docstrings and README.

    Seconds, no browser and no site build: the quick way for a reader to check
    that the numbers in the prose are the ones sdpa_ref computes.
    """
    session.install("-e", ".", *group("doctest"))
    run_pytest(session, "sdpa_ref", "figures", "docs", "README.md")


@nox.session(reuse_venv=True)
def quick(session: nox.Session) -> None:
    """Everything but the browser, torch and the slow tests, in about a minute.

    No site build, no Chromium and no torch: the unit, property and content
    tests and the worked examples, less those marked ``browser``, ``slow`` (a
    second or more each) and ``torch`` (``nox -s parity`` runs those).
    ``nox -s tests`` runs all but the torch ones. The docs group is installed
    too: the extensions' tests import Sphinx, docutils and pybtex. The
    environment is kept between runs, so only the first one installs.
    """
    session.install("-e", ".", *group("test"), *group("docs"))
    run_pytest(session, "-m", "not (browser or slow or torch)")


@nox.session(reuse_venv=True)
def docs(session: nox.Session) -> None:
    """Build the site into docs/_build/html, executing every page afresh.

    Pass ``-- --cached`` to reuse executed notebooks and unchanged pages while
    writing; the default re-executes everything, because the notebook cache
    cannot see a change in sdpa_ref.
    """
    session.install("-e", ".", *group("docs"))
    cached = "--cached" in session.posargs
    options = ["-D", "nb_execution_mode=cache"] if cached else []
    if not cached:
        shutil.rmtree(DOCS_SRC / "_build", ignore_errors=True)
    start = time.perf_counter()
    sphinx_build(session, DOCS_SRC, DOCS_SRC / "_build", *options)
    seconds = time.perf_counter() - start
    kind = "cached" if cached else "cold"
    session.log(f"{kind} build took {seconds:.1f} s")
    session.log(f"The site is at {DOCS_OUT / 'index.html'}")


@nox.session(reuse_venv=True)
def reproducible(session: nox.Session) -> None:
    """Build the committed site twice, in two different folders, and diff them.

    Each copy of the tracked files is built with its own sdpa_ref and figures
    first on the path, so an absolute path that leaked into the output would
    show up as a difference. Every published file must be byte-identical.

    ``-- --against docs/_build/html`` takes a build of this checkout made
    before (by ``nox -s tests`` or ``nox -s docs``, on a clean tree) as the
    first of the two, so CI builds the site twice in all, not three times.
    """
    session.install("-e", ".", *group("docs"))
    against = None
    if "--against" in session.posargs:
        against = Path(session.posargs[session.posargs.index("--against") + 1])
        if not (against / "index.html").exists():
            session.error(f"--against {against}: no built site there")
        if git("status", "--porcelain", "--untracked-files=no"):
            session.error("--against needs a clean tree, to build the commit itself")
    tracked = (
        subprocess.run(
            ["git", "ls-files", "-z"], capture_output=True, check=True, cwd=ROOT
        )
        .stdout.decode()
        .split("\0")
    )
    # Absolute: the pages run in a temporary folder, where a relative
    # PYTHONPATH would no longer find figures/.
    tmp = Path(session.create_tmp()).resolve()
    builds = [] if against is None else [against.resolve()]
    folders = ("first", "second/one/level/deeper")
    for folder in folders[len(builds) :]:
        src = tmp / folder / "sdpa-ref"
        shutil.rmtree(tmp / folder.split("/")[0], ignore_errors=True)
        for name in filter(None, tracked):
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
        out = src / "docs" / "_build"
        sphinx_build(
            session, src / "docs", out, "-q", env=build_env() | {"PYTHONPATH": str(src)}
        )
        builds.append(out / "html")
    first, second = (
        {p.relative_to(b): p for b in [build] for p in b.rglob("*") if p.is_file()}
        for build in builds
    )
    problems = sorted(str(p) for p in set(first) ^ set(second))
    problems += sorted(
        str(p)
        for p in set(first) & set(second)
        if first[p].read_bytes() != second[p].read_bytes()
    )
    leaks = sorted(
        str(p)
        for p in first
        if str(tmp).encode() in first[p].read_bytes()
        or str(ROOT).encode() in first[p].read_bytes()
        or str(tmp).encode() in second.get(p, Path(os.devnull)).read_bytes()
    )
    if problems or leaks:
        session.error(f"builds differ in {problems[:20]}; build paths in {leaks[:20]}")
    session.log(
        f"{len(first)} files, byte-identical in both builds; no build path in any"
    )


@nox.session(python=False)
def serve(session: nox.Session) -> None:
    """Serve the built site on http://127.0.0.1:8000 (build it with docs first)."""
    if not (DOCS_OUT / "index.html").exists():
        session.error("No site yet: run `nox -s docs` first.")
    port = session.posargs[0] if session.posargs else "8000"
    session.log(f"Serving {DOCS_OUT} at http://127.0.0.1:{port}/ (Ctrl-C stops)")
    session.run(
        "python",
        "-m",
        "http.server",
        port,
        "--bind",
        "127.0.0.1",
        "--directory",
        str(DOCS_OUT),
    )


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff's lint rules and its formatter, in check mode; mypy --strict on the
    oracle's modules (the files listed under [tool.mypy] in pyproject.toml)."""
    session.install(*group("lint"))
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")


@nox.session
def parity(session: nox.Session) -> None:
    """Compare sdpa_ref with PyTorch, and check that torch's kernels pass its verdicts.

    In float64: SDPA's forward, and autograd's gradients for every option,
    dense and tiled (to 1e-12). In every dtype and both layouts: torch's SDPA,
    its flash kernel and FlexAttention pass sdpa_ref.testing in 1,000 random
    configurations. Then the testing page's PyTorch examples (its ``>>>``
    blocks that need torch, which the doctests session skips).
    Then FlexAttention's CPU forward with six documented mods and two
    compositions in float32 and float64, torch autograd through score mods,
    and the FlexAttention page's torch examples.

    torch is pinned to 2.13.0: on this project's machines that pin is a CPU
    build on local disk, while a plain ``torch`` pulls a multi-GB CUDA build.
    REQUIRE_TORCH=1 turns every skip for a missing torch into a failure.
    """
    session.install("-e", ".", *group("test"), "torch==2.13.0")
    run_pytest(
        session,
        "tests/oracle/test_parity_torch.py",
        "tests/oracle/test_parity_backward.py",
        "tests/oracle/test_testing_torch.py",
        "tests/oracle/test_torch_inputs.py",
        "tests/oracle/test_mask_fill_torch.py",
        "tests/oracle/test_flex_torch.py",
        "docs/flex.md",
        "tests/site/test_content_formula.py",
        "tests/site/test_content_steps.py",
        "tests/oracle/test_verdicts_torch.py",
        "docs/testing.md",
        REQUIRE_TORCH="1",
    )


@nox.session
def bench(session: nox.Session) -> None:
    """Speed and memory against the targets, printed as ratios side by side.

    Uses the built site for the figure's update time if one exists (run
    ``nox -s docs`` first); otherwise that row is skipped.
    """
    session.install("-e", ".", "torch==2.13.0", "playwright>=1.45")
    # Compare with torch at its usual thread count; the training row pins its
    # own single BLAS thread, as the docs build does.
    env = {k: v for k, v in build_env().items() if not k.endswith("_NUM_THREADS")}
    session.run("python", "benchmarks/bench.py", *session.posargs, env=env)
    if (ROOT / "docs" / "_build" / "html" / "index.html").exists():
        # What each page transform of docs/_ext saves after gzip.
        session.run("python", "benchmarks/transform_gzip.py", env=env)


if os.environ.get("CI"):
    nox.options.error_on_missing_interpreters = True
