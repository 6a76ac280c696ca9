r"""Jacobian influence profiles of real models, exact and estimated, and the text they read.

Chapter :ref:`ch-init`, :eq:`eq-jac-influence` and :eq:`eq-hutchinson`.

The influence of input position :math:`j` on the last output is the Frobenius norm

.. math::
    I_j = \lVert J_j \rVert_F, \qquad
    J_j = \frac{\partial h_L}{\partial e_j} \in \mathbb{R}^{d \times d},

where :math:`e_j` is the token embedding at position :math:`j` (``inputs_embeds``; for GPT-2 the
learned position embedding is added after it, so :math:`\partial/\partial e_j` is also the
derivative w.r.t. the summed input) and :math:`h_L` is the **final-layer hidden state of the last
token after the final norm** — Hugging Face's ``last_hidden_state[:, -1]``, the vector the LM head
reads.  The final norm acts on the last token alone, so it multiplies every :math:`J_j` by the
same :math:`d \times d` matrix; at initialization (unit gain) that matrix is a scaled projection
(RMSNorm: :math:`(I - \hat h \hat h^\top)/\mathrm{rms}`; LayerNorm also removes the mean
direction), so it rescales the profile by a common factor and changes its shape only through the
one or two directions it removes.

Two ways to compute :math:`I_j` for every :math:`j` at once (one forward pass per sequence, then
vector–Jacobian products, each giving a row :math:`v^\top J_j` for *all* positions):

* **exact** (``method="exact"``): the :math:`d` basis vectors :math:`v = e_i` as batched VJPs,
  ``chunk`` directions per backward pass, so memory is bounded by ``chunk`` (not :math:`d`);
  :math:`I_j^2 = \sum_i \lVert e_i^\top J_j \rVert^2`.
* **Hutchinson** (``method="probes"``): :math:`K` random probes :math:`z` with
  :math:`\mathbb{E}[z z^\top] = I` (Rademacher by default, or Gaussian), for which
  :math:`\mathbb{E}_z \lVert z^\top J_j \rVert^2 = \operatorname{tr}(J_j J_j^\top) = I_j^2`
  :cite:p:`hutchinson1989trace`.  With samples :math:`s_k = \lVert z_k^\top J_j \rVert^2`,
  :math:`\hat I_j^2 = \bar s`, :math:`\hat I_j = \sqrt{\bar s}` and, by the delta method
  (:math:`d\sqrt{m} = dm / 2\sqrt{m}`), the standard error
  :math:`\mathrm{se}(\hat I_j) = \mathrm{sd}(s) / (2\sqrt{K \bar s})` (sample standard deviation,
  ``ddof=1``; hence ``probes >= 2``).  The square root makes :math:`\hat I_j` biased low by about
  :math:`\mathrm{se}^2 / (2 I_j)`, negligible next to the standard error whenever the relative
  error is small.  With few probes the reported error is itself noisy (its ratio to the true
  error has Student-like tails; with :math:`K = 2` it is unreliable): use :math:`K \ge 8`.

Over a batch of :math:`B` sequences the profile is the mean :math:`\bar I_j` of the per-sequence
norms.  Two errors are reported: ``stderr``, the Monte Carlo error of the probes *given the
batch* (:math:`\sqrt{\sum_b \mathrm{se}_{bj}^2} / B`, zero for the exact method), which is how far
the estimate may sit from the exact profile of the same sequences; and ``batch_stderr``, the
spread across sequences (:math:`\mathrm{sd}_b / \sqrt{B}`, zero for :math:`B = 1`).

A second target, ``target="argmax_prob"``, is the scalar probability of the argmax next token,
:math:`p = \mathrm{softmax}(W h_L)_{a}` with :math:`a` the argmax (held fixed, not
differentiated), whose gradient norm :math:`\lVert \partial p / \partial e_j \rVert_2` is the
influence the structural theory's authors measure.  A scalar needs one backward pass per sequence,
so it is always exact (``stderr`` is zero).  Only the last token's logits are computed.

Inputs come from :func:`posbias_nb.measure.text.text_batch`: windows of text that ships with Python itself (docstrings of
standard-library modules), or uniformly random tokens.  Everything is seeded; the same arguments
give the same numbers (on the same machine and thread count: float reductions may round
differently elsewhere).  :func:`posbias_nb.measure.cached.profile` wraps it all with the on-disk cache.
"""
from __future__ import annotations

import sys
import warnings

import numpy as np

from .._validate import choice, positive_int

__all__ = ["TARGETS", "METHODS", "PROBE_DISTS", "influence_profile", "hutchinson"]

TARGETS = ("hidden", "argmax_prob")
METHODS = ("probes", "exact")
PROBE_DISTS = ("rademacher", "gaussian")


def _probe_generator(seed: int, b: int):
    import torch

    s = int(np.random.SeedSequence([seed, b, 0x9B0E]).generate_state(1, dtype=np.uint64)[0])
    return torch.Generator(device="cpu").manual_seed(s % (2**63))


def _probes(K: int, d: int, gen, dist: str):
    import torch

    if dist == "rademacher":
        return torch.randint(0, 2, (K, d), generator=gen, dtype=torch.float32) * 2.0 - 1.0
    return torch.randn((K, d), generator=gen, dtype=torch.float32)


def _forward_target(model, x, target: str):
    """The differentiated output for one sequence ``x`` of shape (1, L, d)."""
    import torch

    base = model.base_model
    h = base(inputs_embeds=x, use_cache=False).last_hidden_state[0, -1]  # after the final norm
    if target == "hidden":
        return h
    logits = model.get_output_embeddings()(h)
    cap = getattr(model.config, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    p = torch.softmax(logits.float(), dim=-1)
    return p[int(torch.argmax(p))]


def _vjp_rows(out, x, V):
    """Squared norms ``||v^T J_j||^2`` for each row v of V: a (C, L) float64 tensor."""
    import torch

    if V.shape[0] == 1:
        (g,) = torch.autograd.grad(out, x, grad_outputs=V[0], retain_graph=True)
        return g[0].double().pow(2).sum(-1)[None]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # vmap's "no batching rule, falling back" notes
            (g,) = torch.autograd.grad(out, x, grad_outputs=V, retain_graph=True,
                                       is_grads_batched=True)
        return g[:, 0].double().pow(2).sum(-1)
    except RuntimeError:  # an op without a batching rule: one backward per direction
        rows = []
        for v in V:
            (g,) = torch.autograd.grad(out, x, grad_outputs=v, retain_graph=True)
            rows.append(g[0].double().pow(2).sum(-1))
        return torch.stack(rows)


def influence_profile(model, input_ids, target: str = "hidden", method: str = "probes",
                      probes: int = 8, seed: int = 0, chunk: int | None = None,
                      probe_dist: str = "rademacher", progress: bool = False) -> dict:
    r"""Influence profile of ``model`` on a batch of token ids (see the module docstring).

    Chapter :ref:`ch-init`, :eq:`eq-jac-influence` (``method="exact"``) and :eq:`eq-hutchinson`
    (``method="probes"``); with ``target="argmax_prob"``, the measured influence of chapter
    :ref:`ch-prediction`.

    Parameters
    ----------
    model : transformers ``*ForCausalLM``
        E.g. from :func:`posbias_nb.models.loading.load` (eval mode, float32).
    input_ids : array_like of int, shape (B, L) or (L,)
        Token ids; ``L >= 2``.
    target : {"hidden", "argmax_prob"}
        ``"hidden"``: Frobenius norm of the Jacobian of the last token's final hidden state
        (after the final norm).  ``"argmax_prob"``: L2 norm of the gradient of the probability
        of the argmax next token (always exact).
    method : {"probes", "exact"}
        Hutchinson estimate with ``probes`` random probes, or all ``d`` output directions.
    probes : int
        Number of probes ``K >= 2`` (``method="probes"``).
    seed : int
        Seeds the probes (sequence ``b`` uses ``SeedSequence([seed, b, ...])``).
    chunk : int or None
        Output directions per backward pass (memory grows linearly with it); default 8 for
        probes, 32 for exact.  Changes only float rounding.
    probe_dist : {"rademacher", "gaussian"}
        Probe law; both have identity covariance, Rademacher has the smaller variance.
    progress : bool
        A tqdm bar on stderr.

    Returns
    -------
    dict of numpy arrays
        ``influence`` (L,) mean over the batch; ``stderr`` (L,) the probe error given the batch;
        ``batch_stderr`` (L,) the spread over sequences; ``per_sequence`` and
        ``per_sequence_stderr`` (B, L); ``probe_samples`` (B, K, L), the squared norms
        :math:`\lVert z_k^\top J_j \rVert^2` of each probe (K = 0 for exact results), from
        which :func:`hutchinson` recomputes the estimate for any subset of probes.

    Raises
    ------
    ValueError
        For a bad target, method, probe count, chunk or input shape.
    """
    import torch

    choice("target", target, TARGETS)
    choice("method", method, METHODS)
    choice("probe_dist", probe_dist, PROBE_DISTS)
    seed = positive_int("seed", seed, minimum=0)
    if method == "probes" and target == "hidden":
        probes = positive_int("probes", probes, minimum=2)
    ids = torch.as_tensor(np.asarray(input_ids), dtype=torch.long)
    if ids.ndim == 1:
        ids = ids[None]
    if ids.ndim != 2 or ids.shape[1] < 2 or ids.shape[0] < 1:
        raise ValueError("input_ids must have shape (batch, L) with L >= 2, "
                         f"got {tuple(ids.shape)}")
    B, L = ids.shape
    vocab = model.get_input_embeddings().num_embeddings
    if int(ids.min()) < 0 or int(ids.max()) >= vocab:
        raise ValueError(f"token ids must lie in 0..{vocab - 1}")
    device = next(model.parameters()).device
    d = model.get_input_embeddings().embedding_dim
    if target == "argmax_prob":
        n_dir, C = 1, 1
    else:
        n_dir = d if method == "exact" else probes
        C = chunk if chunk is not None else (32 if method == "exact" else 8)
        C = min(positive_int("chunk", C), n_dir)
    n_chunks = -(-n_dir // C)

    from tqdm import tqdm  # plain bar on stderr (tqdm.auto warns in kernels without widgets)

    bar = tqdm(total=B * n_chunks, disable=not progress, file=sys.stderr, leave=False,
               desc=f"influence L={L}", unit="vjp" if C == 1 else f"x{C} vjp")
    per_seq = np.zeros((B, L))
    per_se = np.zeros((B, L))
    samples = np.zeros((B, probes if (method == "probes" and target == "hidden") else 0, L))
    emb = model.get_input_embeddings()
    try:
        for b in range(B):
            with torch.no_grad():
                x0 = emb(ids[b:b + 1].to(device))
            x = x0.detach().clone().requires_grad_(True)
            with torch.enable_grad():
                out = _forward_target(model, x, target)
                if target == "argmax_prob":
                    (g,) = torch.autograd.grad(out, x)
                    per_seq[b] = g[0].double().pow(2).sum(-1).sqrt().cpu().numpy()
                    bar.update(1)
                    continue
                if method == "exact":
                    eye = torch.eye(d, device=device, dtype=out.dtype)
                    sq = torch.zeros(L, dtype=torch.float64, device=device)
                    for c0 in range(0, d, C):
                        sq += _vjp_rows(out, x, eye[c0:c0 + C]).sum(0)
                        bar.update(1)
                    per_seq[b] = sq.sqrt().cpu().numpy()
                else:
                    Z = _probes(probes, d, _probe_generator(seed, b), probe_dist).to(device)
                    s = torch.cat([_vjp_rows(out, x, Z[c0:c0 + C]) for c0 in
                                   _ticking(range(0, probes, C), bar)]).cpu().numpy()
                    samples[b] = s
                    per_seq[b], per_se[b] = hutchinson(s)
            del out, x
    finally:
        bar.close()
    infl = per_seq.mean(0)
    se = np.sqrt((per_se**2).sum(0)) / B
    bse = per_seq.std(0, ddof=1) / np.sqrt(B) if B > 1 else np.zeros(L)
    return {"influence": infl, "stderr": se, "batch_stderr": bse,
            "per_sequence": per_seq, "per_sequence_stderr": per_se, "probe_samples": samples}


def hutchinson(samples, axis: int = 0):
    r"""Frobenius-norm estimate and its delta-method standard error from probe samples.

    Chapter :ref:`ch-init`, :eq:`eq-hutchinson`.

    ``samples`` holds :math:`s_k = \lVert z_k^\top J \rVert^2` along ``axis`` (K >= 2 of them).
    Returns ``(sqrt(mean(s)), std(s, ddof=1) / (2 sqrt(K mean(s))))`` with ``axis`` reduced; the
    error is 0 where the mean is 0.

    Examples
    --------
    >>> est, se = hutchinson([[4.0], [4.0]])
    >>> float(est[0]), float(se[0])
    (2.0, 0.0)
    """
    s = np.asarray(samples, dtype=np.float64)
    K = s.shape[axis]
    if K < 2:
        raise ValueError(f"the standard error needs at least 2 probes, got {K}")
    m = s.mean(axis)
    sd = s.std(axis, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        se = np.where(m > 0, sd / (2.0 * np.sqrt(K * m)), 0.0)
    return np.sqrt(m), se


def _ticking(it, bar):
    for v in it:
        yield v
        bar.update(1)
