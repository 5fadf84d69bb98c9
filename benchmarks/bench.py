"""Speed and memory of sdpa_ref against its targets, printed as ratios.

Run with ``nox -s bench``. Timings interleave the two contenders and keep the
best of several repeats, so a busy moment hurts neither side more; memory is
the peak NumPy allocation seen by ``tracemalloc``, which is exact. The script
exits non-zero if a ratio misses its target.

The interactive figure's update time is measured in Chromium when it and a
built site are available (``SDPA_SITE``, default docs/_build/html).
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import sdpa_ref
from sdpa_ref.flash import peak_memory

SEED = 2022
REPEATS = 7

# Each change of state, timed in the page: the click, the synchronous redraw
# and the layout it forces. One warm-up round first, then ten measured ones;
# each radio is clicked after a radio of the other group, so it really changes.
UPDATE_TIMES_JS = """() => {
    const root = document.querySelector('[data-figure="scaled-vs-unscaled"]');
    const [qset, wset] = root.querySelectorAll('fieldset');
    const queries = Array.from(qset.querySelectorAll('input'));
    const widths = Array.from(wset.querySelectorAll('input'));
    const out = [];
    for (let round = 0; round < 11; round++) {
        for (const w of widths) {
            for (const q of queries) {
                for (const r of [q, w]) {
                    const t0 = performance.now();
                    r.click();
                    void root.offsetHeight;
                    if (round > 0 && r.checked) out.push(performance.now() - t0);
                }
            }
        }
    }
    return out;
}"""


def best_times(*fns, repeats=REPEATS):
    """Best wall time of each function, measured in interleaved rounds."""
    best = [float("inf")] * len(fns)
    for fn in fns:  # warm up caches and thread pools first
        fn()
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def row(name, measured, target, unit, better="lower"):
    ok = measured <= target if better == "lower" else measured >= target
    sign = "<=" if better == "lower" else ">="
    verdict = "ok" if ok else "MISSED"
    print(
        f"{name:<52} {measured:>9.3f}{unit:<2} target {sign} {target:g}{unit:<2}",
        verdict,
    )
    return ok


def dense_against_torch():
    import torch  # noqa: PLC0415 (only the benchmark needs torch)

    rng = np.random.default_rng(SEED)
    q, k, v = (rng.standard_normal((1, 8, 1024, 64)) for _ in range(3))
    tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
    sdpa = torch.nn.functional.scaled_dot_product_attention
    ours, theirs = best_times(
        lambda: sdpa_ref.attention(q, k, v), lambda: sdpa(tq, tk, tv)
    )
    threads = torch.get_num_threads()
    print(
        f"  dense attention (1, 8, 1024, 64) float64: sdpa_ref {ours * 1e3:.1f} ms, "
        f"torch {theirs * 1e3:.1f} ms ({torch.__version__}, {threads} threads)"
    )
    return row("dense attention time / torch SDPA time", ours / theirs, 2.5, "x")


def tiled_against_dense():
    rng = np.random.default_rng(SEED)
    q, k, v = (rng.standard_normal((1, 1, 4096, 64)) for _ in range(3))
    dense, tiled = best_times(
        lambda: sdpa_ref.attention(q, k, v),
        lambda: sdpa_ref.tiled_attention(q, k, v),
        repeats=5,
    )
    dense_mem = peak_memory(sdpa_ref.attention, q, k, v)
    tiled_mem = peak_memory(sdpa_ref.tiled_attention, q, k, v)
    mib = 2**20
    print(
        f"  n = 4096, d = 64, block 128: dense {dense * 1e3:.0f} ms / "
        f"{dense_mem / mib:.1f} MiB, tiled {tiled * 1e3:.0f} ms / "
        f"{tiled_mem / mib:.1f} MiB"
    )
    ok = row("tiled peak memory / dense peak memory", tiled_mem / dense_mem, 1 / 8, "")
    return (
        row("tiled attention time / dense attention time", tiled / dense, 1.5, "x")
        and ok
    )


def dense_backward_against_torch():
    import torch  # noqa: PLC0415 (only the benchmark needs torch)

    rng = np.random.default_rng(SEED)
    q, k, v, grad_out = (rng.standard_normal((1, 8, 1024, 64)) for _ in range(4))
    sdpa = torch.nn.functional.scaled_dot_product_attention
    t_grad = torch.from_numpy(grad_out)

    def torch_autograd():
        tq, tk, tv = (torch.from_numpy(a).requires_grad_() for a in (q, k, v))
        sdpa(tq, tk, tv).backward(t_grad)

    ours, theirs = best_times(
        lambda: sdpa_ref.attention_backward(q, k, v, grad_out), torch_autograd
    )
    print(
        f"  dense backward (1, 8, 1024, 64) float64: sdpa_ref {ours * 1e3:.1f} ms, "
        f"torch forward + autograd backward {theirs * 1e3:.1f} ms"
    )
    return row("dense backward time / torch autograd time", ours / theirs, 2.5, "x")


def tiled_backward_against_dense():
    rng = np.random.default_rng(SEED)
    q, k, v, grad_out = (rng.standard_normal((1, 1, 4096, 64)) for _ in range(4))
    out, lse = sdpa_ref.tiled_attention(q, k, v, return_lse=True)

    def tiled():
        return sdpa_ref.tiled_attention_backward(q, k, v, out, grad_out, lse)

    def dense():
        return sdpa_ref.attention_backward(q, k, v, grad_out)

    dense_time, tiled_time = best_times(dense, tiled, repeats=3)
    dense_mem, tiled_mem = peak_memory(dense), peak_memory(tiled)
    mib = 2**20
    print(
        f"  backward, n = 4096, d = 64, block 128: dense {dense_time * 1e3:.0f} ms / "
        f"{dense_mem / mib:.1f} MiB, tiled {tiled_time * 1e3:.0f} ms / "
        f"{tiled_mem / mib:.1f} MiB"
    )
    ok = row(
        "tiled backward peak memory / dense backward", tiled_mem / dense_mem, 1 / 8, ""
    )
    return (
        row(
            "tiled backward time / dense backward time",
            tiled_time / dense_time,
            2.0,
            "x",
        )
        and ok
    )


def widget_update():
    site = Path(
        os.environ.get("SDPA_SITE", Path(__file__).parents[1] / "docs/_build/html")
    )
    chromium = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
    if not (site / "index.html").exists() or not chromium.exists():
        print(
            f"  figure update: skipped (needs a site at {site}, Chromium at {chromium})"
        )
        return True
    from playwright.sync_api import sync_playwright  # noqa: PLC0415 (optional)

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "http.server",
            str(port),
            "--bind",
            "127.0.0.1",
            "--directory",
            str(site),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.5)
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=str(chromium),
                args=[
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-background-networking",
                ],
            )
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{port}/index.html")
            # Each change: the click, the synchronous redraw, and the layout it forces.
            times = page.evaluate(UPDATE_TIMES_JS)
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=10)
    times = np.array(times)
    p95 = float(np.percentile(times, 95))
    print(
        f"  figure update over {times.size} changes: median {np.median(times):.1f} ms, "
        f"95th percentile {p95:.1f} ms, slowest {times.max():.1f} ms"
    )
    return row("figure update time, 95th percentile", p95, 16.0, "ms")


#: The training page's experiment, run as the docs build runs it: in a fresh
#: interpreter with one BLAS thread (noxfile.build_env).
TRAINING_SCRIPT = """
import time
from sdpa_ref import training
start, cpu = time.perf_counter(), time.process_time()
result = training.run_experiment()
print(time.perf_counter() - start, time.process_time() - cpu, result["n_runs"])
"""


def training_experiment():
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, "-c", TRAINING_SCRIPT],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout.split()
    seconds, cpu, runs = float(out[0]), float(out[1]), int(out[2])
    # CPU time says what the work costs; wall time what a busy machine adds.
    print(
        f"  training page: {runs} runs of sdpa_ref.training, one BLAS thread: "
        f"{seconds:.1f} s wall, {cpu:.1f} s CPU, load average {os.getloadavg()[0]:.1f}"
    )
    return row("training experiment, whole page's runs", seconds, 30.0, "s")


def main():
    print(
        f"sdpa_ref {sdpa_ref.__version__}, numpy {np.__version__}, Python "
        f"{platform.python_version()}, {os.cpu_count()} cores"
    )
    results = [
        dense_against_torch(),
        tiled_against_dense(),
        dense_backward_against_torch(),
        tiled_backward_against_dense(),
        training_experiment(),
        widget_update(),
    ]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
