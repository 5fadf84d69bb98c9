"""Train one attention layer with and without the √d_k divisor.

The task is associative recall. A sequence holds ``n_pairs`` key–value pairs,
one pair per position, then a query key; the target is the value paired with
that key. Each pair is embedded as ``x_i = E_key[key_i] + E_val[value_i]``
and the query as ``x_q = E_key[query]``. One attention layer with learned
``W_Q``, ``W_K`` and ``W_V`` reads the pairs from the query, and a readout
``W_out`` maps its output to logits over the values; the loss is the
cross-entropy. To answer, the query has to find its one matching pair among
the others: the task needs sharp retrieval.

Only the width of the queries and keys, ``d_k``, changes between arms; the
values keep ``d_v = d_model``, so the arms differ only where the scale acts.

Initialisation is the common default: embeddings N(0, 1), as PyTorch's
``nn.Embedding``, and every weight matrix N(0, gain² / fan_in), LeCun's normal
initialisation, so that at ``gain = 1`` a projection keeps the size of its
input. The optimiser is Adam with fixed hyperparameters for every arm.

Every gradient of the attention comes from :func:`sdpa_ref.attention_backward`;
this module writes the rest of the chain rule (embeddings, projections,
readout, cross-entropy) in NumPy.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ._checks import positive_int
from .backward import attention_backward
from .core import attention, softmax
from .random_model import SEED, standard_score_row
from .spread import entropy, softmax_jacobian_norm

__all__ = [
    "ADAM",
    "PARAMETERS",
    "SCALES",
    "SEEDS",
    "STEPS",
    "WIDTHS",
    "History",
    "Setting",
    "Task",
    "gradients",
    "init_params",
    "init_score_std",
    "predicted_grad_ratio",
    "run_experiment",
    "sample_batch",
    "scale_factor",
    "train",
]

#: The divisors compared: 1/√d_k (the paper's), 1 (none) and 1/d_k (μP's).
SCALES = ("sqrt", "none", "linear")
#: Head widths of the queries and keys.
WIDTHS = (16, 64, 256)
#: One training run per seed and arm; the seed fixes the data and the init.
SEEDS = (0, 1, 2)
#: Adam steps per run.
STEPS = 200
#: Adam's fixed hyperparameters, shared by every arm (PyTorch's defaults but lr).
ADAM = {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8}
#: The learned arrays, in the order the gradients are returned.
PARAMETERS = ("key_embedding", "value_embedding", "w_q", "w_k", "w_v", "w_out")


@dataclass(frozen=True)
class Task:
    """Associative recall: ``n_pairs`` pairs drawn from the vocabularies."""

    n_pairs: int = 8
    n_keys: int = 32
    n_values: int = 16
    batch: int = 16


@dataclass(frozen=True)
class Setting:
    """The model's size and the hyperparameters shared by every arm.

    ``gain`` multiplies the standard deviation of ``W_Q`` and ``W_K`` at
    initialisation, and so the scores at initialisation by ``gain²``.
    """

    d_model: int = 32
    lr: float = 1e-2
    gain: float = 1.0
    task: Task = Task()


class History(NamedTuple):
    """One training run, one entry per step (before that step's update).

    ``loss`` is the batch's mean cross-entropy in nats, ``accuracy`` the
    fraction of queries whose top logit is the right value, ``entropy`` the
    mean entropy of the query's attention row in nats, and ``grad_norm_q``
    the Frobenius norm of the loss's gradient with respect to ``W_Q``.
    """

    loss: np.ndarray
    accuracy: np.ndarray
    entropy: np.ndarray
    grad_norm_q: np.ndarray


def scale_factor(scale, d_k):
    """The number that multiplies ``q·k`` for a scale name.

    Examples
    --------
    >>> [scale_factor(s, 64) for s in SCALES]
    [0.125, 1.0, 0.015625]
    """
    d_k = positive_int(d_k, "d_k")
    factors = {"sqrt": 1 / np.sqrt(d_k), "none": 1.0, "linear": 1 / d_k}
    if scale not in factors:
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
    return float(factors[scale])


def init_score_std(d_k, scale, setting=Setting()):
    """Standard deviation of the scaled scores at initialisation.

    Query coordinates are sums of ``d_model`` products of an N(0, 1)
    embedding coordinate and an N(0, gain²/d_model) weight, so they have
    variance ``gain²``; a pair's embedding is the sum of two, so its key
    coordinates have variance ``2 gain²``. Then ``q·k`` has standard
    deviation ``√(2 d_k) gain²`` (the random model's ``√d_k``, with these
    variances), times the scale.

    Examples
    --------
    >>> print(f"{init_score_std(64, 'none'):.2f} {init_score_std(64, 'sqrt'):.3f}")
    11.31 1.414
    """
    return float(scale_factor(scale, d_k) * np.sqrt(2 * d_k) * setting.gain**2)


def init_params(d_k, rng, setting=Setting()):
    """Initial weights of one model: embeddings N(0, 1), matrices N(0, gain²/fan_in).

    ``rng`` is a pair of generators: the first draws everything whose shape
    does not depend on ``d_k``, so that the arms of one seed share it.

    Examples
    --------
    >>> rngs = (np.random.default_rng(0), np.random.default_rng(1))
    >>> params = init_params(64, rngs)
    >>> params["w_q"].shape
    (32, 64)
    """
    shared, per_width = rng
    task, d = setting.task, setting.d_model
    params = {
        "key_embedding": shared.standard_normal((task.n_keys, d)),
        "value_embedding": shared.standard_normal((task.n_values, d)),
        "w_v": shared.standard_normal((d, d)) / np.sqrt(d),
        "w_out": shared.standard_normal((d, task.n_values)) / np.sqrt(d),
    }
    for name in ("w_q", "w_k"):
        params[name] = per_width.standard_normal((d, d_k)) * (setting.gain / np.sqrt(d))
    return {name: params[name] for name in PARAMETERS}


def sample_batch(rng, task=Task(), steps=None):
    """Recall problems: keys, values, the position asked for, and the target.

    The keys of a sequence are distinct; values may repeat. The query is one
    of the sequence's keys, and the target its value. With ``steps``, every
    array gets a leading axis of that length: one batch per step, drawn at
    once.

    Examples
    --------
    >>> keys, values, asked, target = sample_batch(np.random.default_rng(0))
    >>> bool(np.all(values[np.arange(16), asked] == target))
    True
    """
    lead = (task.batch,) if steps is None else (steps, task.batch)
    keys = np.argsort(rng.random((*lead, task.n_keys)), axis=-1)[..., : task.n_pairs]
    values = rng.integers(task.n_values, size=(*lead, task.n_pairs))
    asked = rng.integers(task.n_pairs, size=lead)
    target = np.take_along_axis(values, asked[..., None], axis=-1)[..., 0]
    return keys, values, asked, target


def gradients(params, batch, scale):
    """Loss, gradients of every parameter, and what the step measures.

    Every array has a leading axis of models trained side by side, which
    share only the shapes: ``params[name]`` has shape ``(models, ...)`` and
    the batch's arrays ``(models, batch, ...)``.

    Parameters
    ----------
    params : dict of numpy.ndarray
        :func:`init_params`' arrays, stacked along a new first axis.
    batch : tuple
        :func:`sample_batch`'s arrays, stacked along a new first axis.
    scale : {"sqrt", "none", "linear"}

    Returns
    -------
    loss : numpy.ndarray, shape (models,)
        Mean cross-entropy, nats.
    grads : dict of numpy.ndarray
        One per parameter, same shapes.
    stats : dict
        ``accuracy`` and ``entropy`` (mean, nats), shape (models,);
        ``q``, ``k``, ``v``, ``d_out`` and ``scale``, the attention call's
        inputs; ``attention``, the :class:`sdpa_ref.Gradients` it returned.

    Examples
    --------
    >>> rngs = (np.random.default_rng(0), np.random.default_rng(1))
    >>> params = {n: p[None] for n, p in init_params(16, rngs).items()}
    >>> batch = [a[None] for a in sample_batch(np.random.default_rng(2))]
    >>> loss, grads, stats = gradients(params, batch, "sqrt")
    >>> grads["w_q"].shape
    (1, 32, 16)
    """
    keys, values, asked, target = batch
    n_models, n_batch = keys.shape[:2]
    n_keys, d_model = params["key_embedding"].shape[1:]
    n_values = params["value_embedding"].shape[1]
    d_k = params["w_q"].shape[2]
    factor = scale_factor(scale, d_k)
    # Embedding lookups as one-hot products, so that their gradients are
    # products too (a scatter-add would loop in Python's time).
    key_hot = _one_hot(keys, n_keys).reshape(n_models, -1, n_keys)
    value_hot = _one_hot(values, n_values).reshape(n_models, -1, n_values)
    asked_hot = _one_hot(np.take_along_axis(keys, asked[..., None], -1)[..., 0], n_keys)
    pairs = key_hot @ params["key_embedding"] + value_hot @ params["value_embedding"]
    query = asked_hot @ params["key_embedding"]  # (models, batch, d_model)

    def heads(x, width):  # (models, batch * n, width) -> (models, batch, n, width)
        return x.reshape(n_models, n_batch, -1, width)

    q = heads(query @ params["w_q"], d_k)  # one query per sequence
    k = heads(pairs @ params["w_k"], d_k)
    v = heads(pairs @ params["w_v"], d_model)
    out, weights = attention(q, k, v, scale=factor, return_weights=True)
    mixture = out[:, :, 0, :]
    logits = mixture @ params["w_out"]
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    picked = np.take_along_axis(log_probs, target[..., None], -1)[..., 0]
    loss = -picked.mean(axis=-1)

    # Cross-entropy's gradient with respect to the logits: softmax - one-hot.
    d_logits = (softmax(logits) - _one_hot(target, n_values)) / n_batch
    d_out = (d_logits @ np.swapaxes(params["w_out"], 1, 2))[:, :, None, :]
    att = attention_backward(q, k, v, d_out, scale=factor)

    def flat(x):  # (models, batch, n, width) -> (models, batch * n, width)
        return x.reshape(n_models, -1, x.shape[-1])

    d_q, d_k_, d_v = flat(att.dq), flat(att.dk), flat(att.dv)
    d_pairs = d_k_ @ np.swapaxes(params["w_k"], 1, 2)
    d_pairs += d_v @ np.swapaxes(params["w_v"], 1, 2)
    d_query = d_q @ np.swapaxes(params["w_q"], 1, 2)
    pairs_t = np.swapaxes(pairs, 1, 2)
    grads = {
        "key_embedding": np.swapaxes(key_hot, 1, 2) @ d_pairs
        + np.swapaxes(asked_hot, 1, 2) @ d_query,
        "value_embedding": np.swapaxes(value_hot, 1, 2) @ d_pairs,
        "w_q": np.swapaxes(query, 1, 2) @ d_q,
        "w_k": pairs_t @ d_k_,
        "w_v": pairs_t @ d_v,
        "w_out": np.swapaxes(mixture, 1, 2) @ d_logits,
    }
    stats = {
        "accuracy": (logits.argmax(axis=-1) == target).mean(axis=-1),
        "entropy": entropy(weights[:, :, 0, :]).mean(axis=-1),
        "q": q,
        "k": k,
        "v": v,
        "d_out": d_out,
        "scale": factor,
        "attention": att,
    }
    return loss, grads, stats


def _one_hot(indices, n):
    return np.eye(n)[indices]


def _generators(seed):
    """Three independent streams for a seed: shared init, per-width init, data."""
    streams = np.random.SeedSequence([SEED, seed]).spawn(3)
    return [np.random.default_rng(s) for s in streams]


def _train_side_by_side(d_k, scale, models, steps):
    """Train one model per ``(seed, setting)`` pair at once; their Histories.

    The models share only shapes (their widths and task), so NumPy runs
    them as one stack; each has its own data, initialisation and learning
    rate, and its numbers do not depend on the others.
    """
    steps = positive_int(steps, "steps")
    inits, batches = [], []
    for seed, setting in models:
        shared, per_width, data = _generators(seed)
        inits.append(init_params(d_k, (shared, per_width), setting))
        batches.append(sample_batch(data, setting.task, steps))
    params = {name: np.stack([p[name] for p in inits]) for name in PARAMETERS}
    data = [np.stack([b[i] for b in batches]) for i in range(4)]  # (models, steps, ...)
    lr = np.array([setting.lr for _, setting in models])[:, None, None]
    first = {name: np.zeros_like(p) for name, p in params.items()}
    second = {name: np.zeros_like(p) for name, p in params.items()}
    b1, b2, eps = ADAM["beta1"], ADAM["beta2"], ADAM["eps"]
    record = np.empty((4, len(models), steps))
    for t in range(steps):
        batch = [a[:, t] for a in data]
        loss, grads, stats = gradients(params, batch, scale)
        record[:, :, t] = (
            loss,
            stats["accuracy"],
            stats["entropy"],
            np.sqrt((grads["w_q"] ** 2).sum(axis=(1, 2))),
        )
        # Adam with bias correction, as in Kingma and Ba's Algorithm 1.
        step_size = lr * (np.sqrt(1 - b2 ** (t + 1)) / (1 - b1 ** (t + 1)))
        for name, g in grads.items():
            m, s = first[name], second[name]
            m *= b1
            m += (1 - b1) * g
            s *= b2
            s += (1 - b2) * (g * g)
            params[name] -= step_size * m / (np.sqrt(s) + eps)
    return [History(*record[:, i]) for i in range(len(models))]


def train(d_k, scale, *, seed, steps=STEPS, setting=Setting()):
    """Train the recall model with Adam and record every step.

    Parameters
    ----------
    d_k : int
        Width of the queries and keys.
    scale : {"sqrt", "none", "linear"}
        Multiply ``q·k`` by ``1/√d_k``, 1 or ``1/d_k``.
    seed : int
        Fixes the initialisation and the batches. Arms with the same seed
        see the same batches and share every initial weight but ``W_Q`` and
        ``W_K``, whose shapes depend on ``d_k``.
    steps : int
        Adam steps.
    setting : Setting
        Model size, learning rate and initial gain, shared by every arm.

    Returns
    -------
    History
        Arrays of length ``steps``. The same arguments give identical arrays.

    Examples
    --------
    >>> h = train(16, "sqrt", seed=0, steps=3)
    >>> h.loss.shape
    (3,)
    >>> print(f"{h.entropy[0]:.2f} nats, at most {np.log(8):.2f}")
    1.62 nats, at most 2.08
    """
    scale_factor(scale, d_k)  # check the arguments before any work
    return _train_side_by_side(d_k, scale, [(seed, setting)], steps)[0]


def predicted_grad_ratio(d_k, scale, setting=Setting(), *, rows="random", n_rows=2000):
    """The prediction of ``|∇W_Q|`` at init, relative to the √d_k arm's.

    The chain rule gives ``∂L/∂q = scale · Σ_j (∂L/∂s_j) k_j``, where the
    score gradients ``∂L/∂s`` are the upstream gradient passed through the
    softmax Jacobian. So the gradient of ``W_Q`` grows like ``scale · |k|``
    times the Jacobian's norm, and ``|k|`` grows like ``√d_k``. The result
    is divided by the same quantity for the 1/√d_k arm at the same width, so
    the constants that all arms share cancel.

    Parameters
    ----------
    d_k : int
    scale : {"sqrt", "none", "linear"}
    setting : Setting
    rows : {"random", "page"}
        Where the Jacobian's norm comes from. ``"page"`` is the saturation
        page's curve: one fixed row of ``n_pairs`` scores
        (:func:`sdpa_ref.standard_score_row`) stretched to the spread that
        :func:`init_score_std` predicts. ``"random"`` averages the norm over
        ``n_rows`` seeded rows drawn from the random model with that spread.
        The two differ for wide unscaled heads: one fixed row saturates and
        its norm falls exponentially, but among random rows some have two
        near-equal top scores, and those keep the average falling only like
        ``1 / spread``.
    n_rows : int

    Examples
    --------
    >>> predicted_grad_ratio(64, "sqrt")
    1.0
    >>> print(f"{predicted_grad_ratio(256, 'none'):.2f}")
    3.05
    >>> print(f"{predicted_grad_ratio(256, 'none', rows='page'):.1e}")
    1.2e-08
    >>> print(f"{predicted_grad_ratio(256, 'linear'):.3f}")
    0.029
    """
    if rows not in {"random", "page"}:
        raise ValueError(f"rows must be 'random' or 'page', got {rows!r}")
    n_pairs = setting.task.n_pairs
    if rows == "page":
        base = standard_score_row(n_pairs)[None, :]
    else:
        base = np.random.default_rng(SEED).standard_normal((n_rows, n_pairs))

    def amplitude(name):
        weights = softmax(init_score_std(d_k, name, setting) * base)
        jacobian_norm = softmax_jacobian_norm(weights).mean()
        return scale_factor(name, d_k) * np.sqrt(d_k) * jacobian_norm

    return float(amplitude(scale) / amplitude("sqrt"))


def run_experiment(
    widths=WIDTHS,
    scales=SCALES,
    seeds=SEEDS,
    steps=STEPS,
    settings=None,
):
    """Every arm, every seed, in every setting, and the time it took.

    Parameters
    ----------
    widths, scales, seeds, steps
        The grid.
    settings : dict of str to Setting, optional
        Named settings; by default the main one and the second ones the page
        shows (a larger initialisation and a smaller learning rate).

    Returns
    -------
    dict
        ``runs[setting][scale][d_k]`` is a dict of arrays of shape
        ``(len(seeds), steps)`` (``loss``, ``accuracy``, ``entropy``,
        ``grad_norm_q``); ``summary`` holds one row per setting and arm with
        the mean and range over seeds of the final loss and accuracy (the
        mean of the last 10 % of steps), the entropy and ``|∇W_Q|`` at step
        1, and that gradient over the same seed's 1/√d_k arm's;
        ``prediction[rows][setting][scale]`` holds
        :func:`predicted_grad_ratio` per width for ``rows`` "random" and
        "page"; ``n_runs`` counts the runs; ``seconds`` is the wall time of
        the training.
    """
    settings = DEFAULT_SETTINGS if settings is None else settings
    start = time.perf_counter()
    models = [(seed, setting) for setting in settings.values() for seed in seeds]
    by_arm = {}
    for scale in scales:
        for d_k in widths:
            histories = _train_side_by_side(d_k, scale, models, steps)
            by_arm[scale, d_k] = {
                name: histories[i * len(seeds) : (i + 1) * len(seeds)]
                for i, name in enumerate(settings)
            }
    seconds = time.perf_counter() - start
    runs = {}
    for name in settings:
        runs[name] = {}
        for scale in scales:
            runs[name][scale] = {}
            for d_k in widths:
                histories = by_arm[scale, d_k][name]
                runs[name][scale][d_k] = {
                    field: np.array([getattr(h, field) for h in histories])
                    for field in History._fields
                }
    tail = max(1, steps // 10)
    summary = []
    for name, by_scale in runs.items():
        for scale, by_width in by_scale.items():
            for d_k, arrays in by_width.items():
                final_loss = arrays["loss"][:, -tail:].mean(axis=1)
                final_acc = arrays["accuracy"][:, -tail:].mean(axis=1)
                summary.append(
                    {
                        "setting": name,
                        "scale": scale,
                        "d_k": d_k,
                        "loss": float(final_loss.mean()),
                        "loss_min": float(final_loss.min()),
                        "loss_max": float(final_loss.max()),
                        "accuracy": float(final_acc.mean()),
                        "accuracy_min": float(final_acc.min()),
                        "accuracy_max": float(final_acc.max()),
                        "init_grad_norm_q": float(arrays["grad_norm_q"][:, 0].mean()),
                        "init_grad_ratio": _init_grad_ratio(by_scale, d_k, arrays),
                        "init_entropy": float(arrays["entropy"][:, 0].mean()),
                    }
                )
    prediction = {
        rows: {
            name: {
                scale: np.array(
                    [predicted_grad_ratio(d, scale, setting, rows=rows) for d in widths]
                )
                for scale in scales
            }
            for name, setting in settings.items()
        }
        for rows in ("random", "page")
    }
    return {
        "runs": runs,
        "summary": summary,
        "prediction": prediction,
        "widths": tuple(widths),
        "scales": tuple(scales),
        "seeds": tuple(seeds),
        "steps": steps,
        "n_runs": len(models) * len(scales) * len(widths),
        "settings": dict(settings),
        "seconds": seconds,
    }


def _init_grad_ratio(runs_of_setting, d_k, arrays):
    """Mean over seeds of |∇W_Q| at step 1 over the same seed's 1/√d_k arm's."""
    if "sqrt" not in runs_of_setting:
        return float("nan")
    reference = runs_of_setting["sqrt"][d_k]["grad_norm_q"][:, 0]
    return float((arrays["grad_norm_q"][:, 0] / reference).mean())


#: The main setting, and the second settings that test its dependence on the
#: initialisation and the learning rate.
DEFAULT_SETTINGS = {
    "main": Setting(),
    "larger init": Setting(gain=2.0),
    "smaller lr": Setting(lr=1e-3),
}
