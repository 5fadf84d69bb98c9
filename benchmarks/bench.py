"""Speed and memory of sdpa_ref against its targets, printed as ratios.

Run with ``nox -s bench``. Timings interleave the two contenders and keep the
best of several repeats, so a busy moment hurts neither side more; memory is
the peak NumPy allocation seen by ``tracemalloc``, which is exact. The script
exits non-zero if a ratio misses its target.

The interactive figure's update time is measured in Chromium when it and a
built site are available (``SDPA_SITE``, default docs/_build/html).
``python benchmarks/bench.py --flash-largest`` measures, alone, the peak memory
of checking FlashAttention's largest test shape, (9, 6, 4096, 128), in bfloat16
with gradients.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

import sdpa_ref
from sdpa_ref.flash import peak_memory

ROOT = Path(__file__).parents[1]
# Serving the site and launching Chromium, as the browser tests do.
sys.path.insert(0, str(ROOT / "tests" / "browser"))
from browsing import ALL_IMAGES, CHROMIUM, launch, serve  # noqa: E402

SEED = 2022
REPEATS = 7
MIB = 2**20

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


#: The flash page's stepper: every step forward and back in both loop orders.
STEPPER_TIMES_JS = """() => {
    const root = document.querySelector('[data-figure="online-softmax"]');
    const back = root.querySelector('.os-back'), next = root.querySelector('.os-next');
    const steps = JSON.parse(root.dataset.state).steps;
    const out = [];
    for (let round = 0; round < 11; round++) {
        for (const r of root.querySelectorAll('.os-order input')) {
            const clicks = [r, ...Array(steps).fill(next), ...Array(steps).fill(back)];
            for (const b of clicks) {
                const before = root.dataset.state, t0 = performance.now();
                b.click();
                void root.offsetHeight;
                const t = performance.now() - t0;
                if (round > 0 && root.dataset.state !== before) out.push(t);
            }
        }
    }
    return out;
}"""


#: The masks page's explorer: every control changed in turn, a few hundred
#: times, through states valid and invalid, small and 16 by 16.
EXPLORER_TIMES_JS = """() => {
    const root = document.querySelector('[data-figure="mask-explorer"]');
    const form = root.querySelector('form'), f = form.elements;
    const changes = [
        () => { f.n_q.value = 16; }, () => { f.n_k.value = 16; },
        () => { f.is_causal.checked = !f.is_causal.checked; },
        () => {
            f.align.value = f.align.value === 'top_left' ? 'bottom_right' : 'top_left';
        },
        () => { f.window.checked = !f.window.checked; },
        () => { f.left.value = String(f.left.selectedIndex % 6); },
        () => { f.right.value = f.right.value === 'none' ? '2' : 'none'; },
        () => { f.sink_tokens.value = f.sink_tokens.value === '0' ? '2' : '0'; },
        () => { f.chunk.value = f.chunk.value === 'none' ? '4' : 'none'; },
        () => { f.n_q.value = 1 + (Number(f.n_q.value) + 6) % 16; },
        () => { f.n_k.value = 1 + (Number(f.n_k.value) + 10) % 16; },
    ];
    const out = [];
    for (let round = 0; round < 41; round++) {
        for (const change of changes) {
            change();
            const before = root.dataset.state, t0 = performance.now();
            form.dispatchEvent(new Event('change', {bubbles: true}));
            void root.offsetHeight;
            const t = performance.now() - t0;
            if (round > 0 && root.dataset.state !== before) out.push(t);
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


def normal_arrays(shape, count, seed=SEED):
    """``count`` arrays of standard normal samples, drawn one by one as taken."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) for _ in range(count))


def torch_row(setting, times, torch_label, name, note=""):
    """Print sdpa_ref's time beside torch's; the row: sdpa_ref's over torch's,
    target 2.5. ``times`` is (sdpa_ref's, torch's) in seconds."""
    ours, theirs = times
    print(
        f"  {setting}: sdpa_ref {ours * 1e3:.1f} ms, "
        f"{torch_label} {theirs * 1e3:.1f} ms{note}"
    )
    return row(name, ours / theirs, 2.5, "x")


def tiled_rows(setting, dense, tiled, names, time_target):
    """Print a tiled route beside the dense one; two rows: peak memory, time.

    ``dense`` and ``tiled`` are (label, seconds, peak bytes); ``names`` name the
    rows of tiled over dense peak memory (target an eighth) and time.
    """
    runs = (
        f"{label} {t * 1e3:.0f} ms / {m / MIB:.1f} MiB"
        for label, t, m in (dense, tiled)
    )
    print(f"  {setting}: {', '.join(runs)}")
    memory_name, time_name = names
    ok = row(memory_name, tiled[2] / dense[2], 1 / 8, "")
    return row(time_name, tiled[1] / dense[1], time_target, "x") and ok


def dense_against_torch():
    import torch  # noqa: PLC0415 (only the benchmark needs torch)

    q, k, v = normal_arrays((1, 8, 1024, 64), 3)
    tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
    sdpa = torch.nn.functional.scaled_dot_product_attention
    ours, theirs = best_times(
        lambda: sdpa_ref.attention(q, k, v), lambda: sdpa(tq, tk, tv)
    )
    threads = torch.get_num_threads()
    return torch_row(
        "dense attention (1, 8, 1024, 64) float64",
        (ours, theirs),
        "torch",
        "dense attention time / torch SDPA time",
        note=f" ({torch.__version__}, {threads} threads)",
    )


def tiled_against_dense():
    q, k, v = normal_arrays((1, 1, 4096, 64), 3)
    dense, tiled = best_times(
        lambda: sdpa_ref.attention(q, k, v),
        lambda: sdpa_ref.tiled_attention(q, k, v),
        repeats=5,
    )
    return tiled_rows(
        "n = 4096, d = 64, block 128",
        ("dense", dense, peak_memory(sdpa_ref.attention, q, k, v)),
        ("tiled", tiled, peak_memory(sdpa_ref.tiled_attention, q, k, v)),
        (
            "tiled peak memory / dense peak memory",
            "tiled attention time / dense attention time",
        ),
        time_target=1.5,
    )


def dense_backward_against_torch():
    import torch  # noqa: PLC0415 (only the benchmark needs torch)

    q, k, v, grad_out = normal_arrays((1, 8, 1024, 64), 4)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    t_grad = torch.from_numpy(grad_out)

    def torch_autograd():
        tq, tk, tv = (torch.from_numpy(a).requires_grad_() for a in (q, k, v))
        sdpa(tq, tk, tv).backward(t_grad)

    ours, theirs = best_times(
        lambda: sdpa_ref.attention_backward(q, k, v, grad_out), torch_autograd
    )
    return torch_row(
        "dense backward (1, 8, 1024, 64) float64",
        (ours, theirs),
        "torch forward + autograd backward",
        "dense backward time / torch autograd time",
    )


def tiled_backward_against_dense():
    q, k, v, grad_out = normal_arrays((1, 1, 4096, 64), 4)
    out, lse = sdpa_ref.tiled_attention(q, k, v, return_lse=True)

    def tiled():
        return sdpa_ref.tiled_attention_backward(q, k, v, out, grad_out, lse)

    def dense():
        return sdpa_ref.attention_backward(q, k, v, grad_out)

    dense_time, tiled_time = best_times(dense, tiled, repeats=3)
    return tiled_rows(
        "backward, n = 4096, d = 64, block 128",
        ("dense", dense_time, peak_memory(dense)),
        ("tiled", tiled_time, peak_memory(tiled)),
        (
            "tiled backward peak memory / dense backward",
            "tiled backward time / dense backward time",
        ),
        time_target=2.0,
    )


def _kernel_under_test(shape, dtype, seed=SEED):
    """torch's SDPA in ``dtype``, forward and backward: what a kernel test holds."""
    import torch  # noqa: PLC0415 (only the benchmark needs torch)

    q, k, v, grad_out = (
        torch.from_numpy(a).to(dtype) for a in normal_arrays(shape, 4, seed)
    )
    for t in (q, k, v):
        t.requires_grad_()
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    out.backward(grad_out)
    return {
        "out": out.detach(),
        "q": q,
        "k": k,
        "v": v,
        "grad_out": grad_out,
        "grads": (q.grad, k.grad, v.grad),
    }


def _check(case):
    from sdpa_ref import testing  # noqa: PLC0415

    return testing.check_attention(
        case["out"],
        case["q"],
        case["k"],
        case["v"],
        grad_out=case["grad_out"],
        grads=case["grads"],
    )


def check_against_torch():
    """check_attention with gradients against torch's float64 forward + backward."""
    import torch  # noqa: PLC0415 (only the benchmark needs torch)

    shape = (2, 8, 512, 128)
    case = _kernel_under_test(shape, torch.float32)
    q, k, v, grad_out = (torch.from_numpy(a) for a in normal_arrays(shape, 4))
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def torch_float64():
        tq, tk, tv = (t.detach().requires_grad_() for t in (q, k, v))
        sdpa(tq, tk, tv).backward(grad_out)

    assert _check(case).passed
    ours, theirs = best_times(lambda: _check(case), torch_float64, repeats=5)
    print(
        f"  check_attention, float32 kernel with dq, dk, dv, {shape}: "
        f"{ours * 1e3:.0f} ms; torch float64 forward + autograd backward "
        f"{theirs * 1e3:.0f} ms"
    )
    return row(
        "check with gradients time / torch float64 fwd+bwd", ours / theirs, 2.0, "x"
    )


def check_peak_memory(shape=(1, 4, 4096, 64), target_gib=1.0):
    """Peak memory of check_attention with gradients: tiled above a size."""
    import torch  # noqa: PLC0415 (only the benchmark needs torch)

    case = _kernel_under_test(shape, torch.float32)
    peak = peak_memory(_check, case)
    dense = 8 * int(np.prod(shape[:-1])) * shape[-2]
    print(
        f"  check_attention, float32 kernel with dq, dk, dv, {shape}: peak "
        f"{peak / 2**20:.0f} MiB (one dense float64 score matrix alone: "
        f"{dense / 2**20:.0f} MiB)"
    )
    return row(
        f"check with gradients peak memory {shape}", peak / 2**30, target_gib, "GiB"
    )


def check_flash_largest():
    """FlashAttention's largest test shape in bfloat16, with gradients (opt-in)."""
    import torch  # noqa: PLC0415 (only the benchmark needs torch)

    shape = (9, 6, 4096, 128)
    case = _kernel_under_test(shape, torch.bfloat16)
    start = time.perf_counter()
    peak = peak_memory(_check, case)
    seconds = time.perf_counter() - start
    print(
        f"  check_attention, bfloat16 kernel with dq, dk, dv, {shape}: peak "
        f"{peak / 2**30:.2f} GiB in {seconds:.0f} s"
    )
    return row(f"check with gradients peak memory {shape}", peak / 2**30, 6.0, "GiB")


def _site_for(what):
    """The built site, or None (and a line saying so) without it or Chromium."""
    site = Path(os.environ.get("SDPA_SITE", ROOT / "docs/_build/html"))
    if not (site / "index.html").exists() or not CHROMIUM.exists():
        print(f"  {what}: skipped (needs a site at {site}, Chromium at {CHROMIUM})")
        return None
    return site


@contextmanager
def _chromium_serving(site):
    """Chromium, and the base URL of ``site`` served on 127.0.0.1."""
    from playwright.sync_api import sync_playwright  # noqa: PLC0415 (optional)

    with serve(site) as base, sync_playwright() as p:
        browser = launch(p)
        try:
            yield browser, base
        finally:
            browser.close()


def widget_update(page_name="index.html", script=UPDATE_TIMES_JS, name="figure"):
    site = _site_for(f"{name} update")
    if site is None:
        return True
    with _chromium_serving(site) as (browser, base):
        page = browser.new_page()
        page.goto(base + page_name)
        # Each change: the click, the synchronous redraw, and the layout it forces.
        times = page.evaluate(script)
    times = np.array(times)
    p95 = float(np.percentile(times, 95))
    print(
        f"  {name} update over {times.size} changes: median {np.median(times):.1f} ms, "
        f"95th percentile {p95:.1f} ms, slowest {times.max():.1f} ms"
    )
    return row(f"{name} update time, 95th percentile", p95, 16.0, "ms")


#: Chrome DevTools' "Fast 3G" preset, as Lighthouse's mobile runs used it: a
#: 562.5 ms round trip, 1.6 Mbit/s down and 750 kbit/s up, each at 90 per cent;
#: with the phone's CPU four times slower than this machine's.
FAST_3G = {
    "offline": False,
    "latency": 562.5,
    "downloadThroughput": 1.6 * 1024 * 1024 / 8 * 0.9,
    "uploadThroughput": 750 * 1024 / 8 * 0.9,
}
CPU_SLOWDOWN = 4
PAINTS = """Object.fromEntries(performance.getEntriesByType('paint')
    .map(e => [e.name, e.startTime]))"""
#: Bytes decoded for the page and everything it requested.
DECODED = """() => {
    const [page] = performance.getEntriesByType('navigation');
    return performance.getEntriesByType('resource')
        .reduce((sum, r) => sum + r.decodedBodySize, page.decodedBodySize);
}"""


def first_paint(pages=3, loads=3):
    """First contentful paint of the heaviest pages on a throttled phone.

    The heaviest are those that need the most bytes once all their images
    have loaded. Each is loaded cold ``loads`` times (no cache, throttled);
    the row is the slowest page's median.
    """
    site = _site_for("first paint")
    if site is None:
        return True
    results = {}
    with _chromium_serving(site) as (browser, base):
        phone = {
            "viewport": {"width": 390, "height": 844},
            "is_mobile": True,
            "has_touch": True,
            "device_scale_factor": 3,
        }
        weights = {}
        for name in sorted(p.name for p in site.glob("*.html")):
            context = browser.new_context(**phone)
            page = context.new_page()
            page.goto(base + name, wait_until="load")
            page.evaluate(ALL_IMAGES)
            weights[name] = page.evaluate(DECODED)
            context.close()
        heaviest = sorted(weights, key=weights.get, reverse=True)[:pages]
        for name in heaviest:
            fcp = []
            for _ in range(loads):
                context = browser.new_context(**phone)
                page = context.new_page()
                cdp = context.new_cdp_session(page)
                cdp.send("Network.enable")
                cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})
                cdp.send("Network.emulateNetworkConditions", FAST_3G)
                cdp.send("Emulation.setCPUThrottlingRate", {"rate": CPU_SLOWDOWN})
                page.goto(base + name, wait_until="load", timeout=120_000)
                fcp.append(page.evaluate(PAINTS)["first-contentful-paint"])
                context.close()
            results[name] = (weights[name], float(np.median(fcp)))
    for name, (weight, fcp) in results.items():
        print(
            f"  {name}: {weight / 1000:.0f} kB once all images load; first contentful "
            f"paint {fcp:.0f} ms (median of {loads}, Fast 3G, CPU / {CPU_SLOWDOWN})"
        )
    worst = max(fcp for _, fcp in results.values())
    return row("first paint, throttled phone, 3 heaviest pages", worst, 1500.0, "ms")


#: The training page's experiment, run as the docs build runs it: in a fresh
#: interpreter with one BLAS thread (noxfile.build_env).
TRAINING_SCRIPT = """
import time
from sdpa_ref import training
start, cpu = time.perf_counter(), time.process_time()
result = training.run_experiment()
print(time.perf_counter() - start, time.process_time() - cpu, result["n_runs"],
      result["steps"], result["settings"]["main"].d_model, result["long"]["steps"])
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
    seconds, cpu = float(out[0]), float(out[1])
    runs, steps, d_model, long_steps = (int(x) for x in out[2:6])
    # CPU time says what the work costs; wall time what a busy machine adds.
    print(
        f"  training page: {runs} runs of {steps} steps at d_model = {d_model}, "
        f"one per width continued to {long_steps} steps, "
        f"one BLAS thread: {seconds:.1f} s wall, {cpu:.1f} s CPU, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    return row("training experiment, whole page's runs", seconds, 30.0, "s")


#: Documents packed into one sequence of 4096 tokens for the mask_mod row.
DOCUMENT_LENGTHS = (512, 1024, 256, 768, 1536)


def document_mask_mod_against_dense_mask():
    """A document-causal mask_mod, called block by block, against the same mask
    built as a dense boolean array and given to dense attention."""
    n = sum(DOCUMENT_LENGTHS)
    q, k, v = normal_arrays((1, 1, n, 64), 3)
    ids = np.repeat(np.arange(len(DOCUMENT_LENGTHS)), DOCUMENT_LENGTHS)
    mask_mod = sdpa_ref.mods.document(ids, sdpa_ref.mods.causal())
    mask = sdpa_ref.mods.create_mask(mask_mod, 1, 1, n, n)
    tiled, dense = best_times(
        lambda: sdpa_ref.tiled_attention(q, k, v, mask_mod=mask_mod),
        lambda: sdpa_ref.attention(q, k, v, mask=mask),
        repeats=5,
    )
    tiled_mem = peak_memory(sdpa_ref.tiled_attention, q, k, v, mask_mod=mask_mod)
    # The dense route holds the mask for as long as it runs.
    dense_mem = peak_memory(sdpa_ref.attention, q, k, v, mask=mask) + mask.nbytes
    return tiled_rows(
        f"n = {n}, d = 64, {len(DOCUMENT_LENGTHS)} documents, causal within each",
        (f"dense with a {mask.nbytes / MIB:.0f} MiB boolean mask", dense, dense_mem),
        ("tiled with the mask_mod", tiled, tiled_mem),
        (
            "mask_mod tiled peak memory / dense boolean mask",
            "mask_mod tiled time / dense boolean mask time",
        ),
        time_target=1.5,
    )


def main():
    print(
        f"sdpa_ref {sdpa_ref.__version__}, numpy {np.__version__}, Python "
        f"{platform.python_version()}, {os.cpu_count()} cores"
    )
    if "--flash-largest" in sys.argv:
        # Minutes and several GiB: a measurement to report, not a routine row.
        sys.exit(0 if check_flash_largest() else 1)
    results = [
        dense_against_torch(),
        tiled_against_dense(),
        dense_backward_against_torch(),
        tiled_backward_against_dense(),
        check_against_torch(),
        check_peak_memory(),
        document_mask_mod_against_dense_mask(),
        training_experiment(),
        widget_update(),
        widget_update("flash.html", STEPPER_TIMES_JS, "online-softmax figure"),
        widget_update("masks.html", EXPLORER_TIMES_JS, "mask explorer"),
        first_paint(),
    ]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
