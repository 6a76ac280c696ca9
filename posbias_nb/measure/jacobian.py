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

Cost and memory.  One forward pass, then one backward pass per direction (``chunk`` directions
per pass, :func:`default_chunk`: plain passes on the CPU), so the time is within a few
per cent of the bare floor "one forward, K backward passes".  The autograd graph of the whole
model (every layer's activations, about 1.3 GB per 1,000 tokens for a 135M-parameter model with
fused attention) is kept only while it fits in :data:`GRAPH_BUDGET`; beyond it the top layers
keep their graph and the lower ones are recomputed one at a time from their stored inputs
(:class:`_Layerwise`), which bounds memory by the budget plus a part linear in :math:`L`
(:math:`n_\text{layers} L d` floats), at the price of at most one extra forward pass.  Use fused
attention (``attn="sdpa"``, the default of :func:`posbias_nb.models.loading.load`): eager
attention stores an :math:`L \times L` matrix per head and layer.

A second target, ``target="argmax_prob"``, is the scalar probability of the argmax next token,
:math:`p = \mathrm{softmax}(W h_L)_{a}` with :math:`a` the argmax (held fixed, not
differentiated), whose gradient norm :math:`\lVert \partial p / \partial e_j \rVert_2` is the
influence the structural theory's authors measure.  A scalar needs one backward pass per sequence,
so it is always exact (``stderr`` is zero).  Only the last token's logits are computed.

Inputs come from :func:`posbias_nb.tasks.text.text_batch`: windows of text that ships with Python itself (docstrings of
standard-library modules), or uniformly random tokens.  Everything is seeded; the same arguments
give the same numbers (on the same machine and thread count: float reductions may round
differently elsewhere).  :func:`posbias_nb.measure.cached.profile` wraps it all with the on-disk cache.
"""
from __future__ import annotations

import sys
import warnings

import numpy as np

from .._validate import choice, positive_int

__all__ = ["TARGETS", "METHODS", "PROBE_DISTS", "influence_profile", "hutchinson", "default_chunk"]

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
    if x.is_leaf and x.requires_grad:  # a model that scales its embeddings in place (CTRL)
        x = x.clone()
    h = base(inputs_embeds=x, use_cache=False).last_hidden_state[0, -1]  # after the final norm
    if target == "hidden":
        return h
    logits = model.get_output_embeddings()(h)
    cap = getattr(model.config, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    p = torch.softmax(logits.float(), dim=-1)
    return p[int(torch.argmax(p))]


def _vjp(out, inp, V, retain: bool = True):
    """Vector-Jacobian products: ``v^T d out / d inp`` for each row ``v`` of ``V``, stacked into
    a ``(C, *inp.shape)`` tensor.  One row: a plain backward pass; several: one batched pass
    (``is_grads_batched``, vmap), or one pass per row where an op has no batching rule."""
    import torch

    if V.shape[0] == 1:
        (g,) = torch.autograd.grad(out, inp, grad_outputs=V[0], retain_graph=retain)
        return g[None]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # vmap's "no batching rule, falling back" notes
            (g,) = torch.autograd.grad(out, inp, grad_outputs=V, retain_graph=True,
                                       is_grads_batched=True)
        return g
    except RuntimeError:  # an op without a batching rule: one backward per direction
        return torch.stack([torch.autograd.grad(out, inp, grad_outputs=v, retain_graph=True)[0]
                            for v in V])


def _vjps(out, inp, V, C: int):
    """:func:`_vjp` over ``V`` in chunks of ``C`` rows (``C`` directions per backward pass)."""
    import torch

    return torch.cat([_vjp(out, inp, V[c0:c0 + C]) for c0 in range(0, V.shape[0], C)])


def _sq(g):
    """Squared norms per position of ``(C, 1, L, d)`` gradients: a (C, L) float64 tensor."""
    return g[:, 0].double().pow(2).sum(-1)


def _vjp_rows(out, x, V):
    """Squared norms ``||v^T J_j||^2`` for each row v of V: a (C, L) float64 tensor."""
    return _sq(_vjp(out, x, V))


def default_chunk(method: str, device) -> int:
    """Output directions per backward pass when ``chunk=None``.

    Probes on the CPU: 1, plain backward passes, which is exactly the bare floor "one forward,
    K backward passes" (``bench/bench_measure.py --only floor``).  Measured on this project's
    2-core machine, interleaved in one process, medians of 3 rounds as ratios to the floor:
    random-init GPT-2, L = 1024, 8 probes: plain 0.96, batched by 8 through
    ``is_grads_batched`` 1.31; random-init SmolLM2-135M, L = 512: plain 0.96, batched 0.99 (an
    earlier "batched twice as fast" there was measured on a loaded machine and did not
    reproduce).  On other devices: 8 probes per batched pass, where one large kernel can fill the
    accelerator (not measured in this project: no accelerator in CI).  The exact method batches
    32 directions on every device (768 plain passes per sequence would pay the per-pass overhead
    768 times).  ``chunk=`` overrides; it changes only float rounding.
    """
    kind = getattr(device, "type", None) or str(device).split(":")[0]
    if method == "exact":
        return 32
    return 1 if kind == "cpu" else 8


# Long contexts: layer by layer -------------------------------------------------------------

class _Unsupported(Exception):
    """The model's forward is not a plain chain of decoder layers: use the one-graph path."""


def _tensors(obj):
    import torch

    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for v in obj:
            yield from _tensors(v)
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _tensors(v)


def _decoder_layers(model):
    """The model's stack of ``num_hidden_layers`` blocks (the first ``ModuleList`` of that
    length), or raise :class:`_Unsupported`."""
    import torch

    n = getattr(model.config, "num_hidden_layers", None)
    for m in model.modules():
        if isinstance(m, torch.nn.ModuleList) and n and len(m) == n:
            return list(m)
    raise _Unsupported("no stack of decoder layers found")


def _hidden_of(args, kwargs):
    if args:
        return args[0], 0
    if "hidden_states" in kwargs:
        return kwargs["hidden_states"], "hidden_states"
    raise _Unsupported("a layer called without its hidden states")


def _with_hidden(args, kwargs, where, h):
    if where == 0:
        return (h, *args[1:]), kwargs
    return args, {**kwargs, where: h}


class _Layerwise:
    r"""One forward pass that keeps the autograd graph of only the top ``keep`` decoder layers
    and the inputs of the others, then vector-Jacobian products carried down the stack
    (chapter :ref:`ch-init`, :eq:`eq-jac-influence`).

    The forward pass runs with hooks on the decoder layers: the input of each of the lower
    ``n_layers - keep`` layers is stored detached (no graph spans them); the input of layer
    ``n_layers - keep`` becomes a fresh leaf, from which the graph of the top layers and the
    target (the final norm; the LM head for ``"argmax_prob"``) is recorded (``keep = 0``: the leaf
    is the top layer's output, a graph of one norm).  ``sweep`` takes the cotangents of the
    target down to that leaf through the kept graph, then for each lower layer from the top it
    recomputes the layer's forward from its stored input (the same kernels on the same numbers),
    applies the layer's vector-Jacobian product to every cotangent and frees the layer's graph.
    The chain rule across layers is exactly one backward pass of the whole graph, so the
    numbers equal the one-graph path's (bit for bit on CPU in the tests); the cost is one
    forward pass of the recomputed layers.  Memory: the graph of ``keep`` layers, the stored
    inputs (:math:`(n_\text{layers} - \text{keep}) L d` floats), one layer's graph and the
    cotangents (:math:`G L d` floats for ``G`` directions).

    The checks below raise :class:`_Unsupported` (the caller falls back to the one-graph path)
    unless the model is a plain chain: layers called once each, in order, each one's input being
    the previous one's output, and no other input of a layer depending on the embeddings.
    """

    def __init__(self, model, x, target, keep: int = 0):
        import torch

        self.layers = _decoder_layers(model)
        n = len(self.layers)
        self.n_recompute = n - keep
        self.inputs = []  # (args, kwargs, where) with the hidden states detached
        self.h0 = None  # the first layer's input, as a function of x (GPT-2 adds positions)
        self.leaf = None
        prev = [None]
        seen = [0]

        def pre(mod, args, kwargs):
            i = seen[0]
            seen[0] += 1
            if i >= n or self.layers[i] is not mod:
                raise _Unsupported("decoder layers called out of order")
            h, where = _hidden_of(args, kwargs)
            if i == 0:
                self.h0 = h
            elif h is not prev[0]:
                raise _Unsupported("something acts between two decoder layers")
            rest = _with_hidden(args, kwargs, where, None)
            if any(t.requires_grad for t in _tensors(rest)):
                raise _Unsupported("a layer input other than the hidden states needs gradients")
            if i < self.n_recompute:
                args, kwargs = _with_hidden(args, kwargs, where, h.detach())
                self.inputs.append((args, kwargs, where))
                return args, kwargs
            if i == self.n_recompute:  # the bottom of the kept graph
                self.leaf = h.detach().requires_grad_(True)
                return _with_hidden(args, kwargs, where, self.leaf)
            return None

        def post(mod, args, kwargs, output):
            h = output[0] if isinstance(output, tuple) else output
            if not isinstance(h, torch.Tensor):
                raise _Unsupported("a decoder layer returned no tensor")
            if seen[0] == n and self.n_recompute == n:  # keep = 0: the leaf is the top output
                h = self.leaf = h.detach().requires_grad_(True)
                output = (h, *output[1:]) if isinstance(output, tuple) else h
            prev[0] = h
            return output

        handles = []
        try:
            for layer in self.layers:
                handles.append(layer.register_forward_pre_hook(pre, with_kwargs=True))
                handles.append(layer.register_forward_hook(post, with_kwargs=True))
            with torch.enable_grad():
                self.out = _forward_target(model, x, target)
        finally:
            for hd in handles:
                hd.remove()
        if seen[0] != n or self.leaf is None or not self.out.requires_grad:
            raise _Unsupported("the target does not depend on the top layers' output")

    def _layer(self, i):
        """Recompute layer ``i``: ``(input leaf, output)`` with a graph of this layer only."""
        import torch

        args, kwargs, where = self.inputs[i]
        h = (args[0] if where == 0 else kwargs[where]).detach().requires_grad_(True)
        args, kwargs = _with_hidden(args, kwargs, where, h)
        with torch.enable_grad():
            y = self.layers[i](*args, **kwargs)
        return h, (y[0] if isinstance(y, tuple) else y)

    def sweep(self, x, V, C: int, tick=lambda: None):
        """Gradients w.r.t. ``x`` of ``<v, target>`` for each row of ``V``: ``(G, *x.shape)``."""
        import torch

        with torch.enable_grad():
            cot = _vjps(self.out, self.leaf, V, C)
            tick()
            for i in reversed(range(self.n_recompute)):
                h, y = self._layer(i)
                cot = _vjps(y, h, cot, C)
                del h, y  # this layer's graph goes with them
                tick()
            if self.h0 is not x:
                cot = _vjps(self.h0, x, cot, C)
        return cot


#: Bytes of autograd graph the automatic choice (``checkpoint=None``) keeps; the layers beyond
#: it are recomputed (see :func:`_kept_layers`).
GRAPH_BUDGET = 2 * 2**30


def _graph_bytes_per_layer(model, L: int) -> int:
    """Rough size of one decoder layer's autograd graph at length ``L``: about ``8 d + 4 f``
    floats per token (``d`` the width, ``f`` the MLP width: the norms, projections, attention
    output and MLP activations it saves; 44 kB per token for SmolLM2-135M, 8 d + 4 f = 10752
    floats, against 2.7 GB / (30 layers x 2048 tokens) measured), plus the ``L x L``
    probabilities per head that eager attention stores."""
    cfg = model.config
    d = model.get_input_embeddings().embedding_dim
    f = (getattr(cfg, "intermediate_size", None) or getattr(cfg, "n_inner", None)
         or getattr(cfg, "ffn_hidden_size", None) or 4 * d)
    per_token = 8 * d + 4 * int(f)
    item = next(model.parameters()).element_size()
    eager = getattr(cfg, "_attn_implementation", "eager") == "eager"
    heads = getattr(cfg, "num_attention_heads", None) or getattr(cfg, "n_head", 1) or 1
    return item * L * per_token + (3 * item * int(heads) * L * L if eager else 0)


def _kept_layers(model, L: int, budget: int | None = None) -> int | None:
    """How many top layers keep their graph within ``budget`` bytes (default
    :data:`GRAPH_BUDGET`; ``checkpoint=None``); None: all of them (the one-graph path)."""
    budget = GRAPH_BUDGET if budget is None else budget
    n = getattr(model.config, "num_hidden_layers", None)
    per = _graph_bytes_per_layer(model, L)
    if not n or per * n <= budget:
        return None
    return int(budget // per)


def _directions(method, target, probes, d, seed, b, probe_dist, device, dtype):
    import torch

    if target == "argmax_prob":
        return torch.ones(1, device=device, dtype=dtype)
    if method == "exact":
        return torch.eye(d, device=device, dtype=dtype)
    return _probes(probes, d, _probe_generator(seed, b), probe_dist).to(device)


def influence_profile(model, input_ids, target: str = "hidden", method: str = "probes",
                      probes: int = 8, seed: int = 0, chunk: int | None = None,
                      probe_dist: str = "rademacher", progress: bool = False,
                      checkpoint: bool | None = None) -> dict:
    r"""Influence profile of ``model`` on a batch of token ids (see the module docstring).

    Chapter :ref:`ch-init`, :eq:`eq-jac-influence` (``method="exact"``) and :eq:`eq-hutchinson`
    (``method="probes"``); with ``target="argmax_prob"``, the measured influence of chapter
    :ref:`ch-prediction`.

    Parameters
    ----------
    model : transformers ``*ForCausalLM``
        E.g. from :func:`posbias_nb.models.loading.load` (eval mode, float32).  Fused attention
        (``attn="sdpa"``, the default there) keeps memory linear in the length; eager attention
        stores an ``L x L`` matrix per head.
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
        Output directions per backward pass.  None: :func:`default_chunk` (probes: plain
        passes on the CPU, batches of 8 elsewhere; exact: batches of 32 directions).  Batching
        multiplies the backward pass's memory by ``chunk``.
        Changes only float rounding.
    probe_dist : {"rademacher", "gaussian"}
        Probe law; both have identity covariance, Rademacher has the smaller variance.
    progress : bool
        A tqdm bar on stderr.
    checkpoint : bool or None
        True: layer by layer (:class:`_Layerwise`): one forward pass that keeps only each
        decoder layer's input, then the vector-Jacobian products carried down the stack, each
        layer recomputed once per group of directions (all probes form one group; the exact
        method groups 32 directions).  Memory: the ``n_layers`` layer inputs plus one layer's
        graph, linear in ``L`` with fused attention; time: one extra forward pass.  False: one
        autograd graph of the whole model, kept for all directions (every layer's activations
        at once).  None (default): the one graph while it fits in :data:`GRAPH_BUDGET` (2 GiB,
        estimated by :func:`_graph_bytes_per_layer`), else the graph of as many top layers as
        fit and the lower ones recomputed layer by layer: memory at most the budget plus a
        part linear in ``L``, time at most one extra forward pass.  A model whose forward is
        not a plain chain of layers falls back to the one-graph path (``True`` then raises).
        Changes only float rounding.

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
        For a bad target, method, probe count, chunk or input shape; ``checkpoint=True`` for a
        model that is not a plain chain of decoder layers.
    """
    import torch

    choice("target", target, TARGETS)
    choice("method", method, METHODS)
    choice("probe_dist", probe_dist, PROBE_DISTS)
    seed = positive_int("seed", seed, minimum=0)
    if checkpoint not in (None, True, False):
        raise ValueError(f"checkpoint must be True, False or None, got {checkpoint!r}")
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
        C = chunk if chunk is not None else default_chunk(method, device)
        C = min(positive_int("chunk", C), n_dir)
    # directions carried down the stack together (layer by layer): all probes; exact: 32 at a
    # time (their cotangents, G x L x d floats, are what this path keeps besides layer inputs)
    G = n_dir if method == "probes" or target == "argmax_prob" else min(n_dir, C * max(1, 32 // C))
    if checkpoint is None:
        keep = _kept_layers(model, L)
        layerwise = keep is not None
    else:
        keep, layerwise = 0, checkpoint

    from tqdm import tqdm  # plain bar on stderr (tqdm.auto warns in kernels without widgets)

    bar = tqdm(total=B * -(-n_dir // C), disable=not progress, file=sys.stderr, leave=False,
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
            V = _directions(method, target, probes, d, seed, b, probe_dist, device, x.dtype)
            sq = None
            if layerwise:
                try:
                    lw = _Layerwise(model, x, target, keep=keep)
                except _Unsupported as e:
                    if checkpoint:
                        raise ValueError(f"checkpoint=True needs a plain chain of decoder "
                                         f"layers: {e}") from None
                    layerwise = False  # the same for every sequence: decide once
                else:
                    bar.total = B * -(-n_dir // G) * (lw.n_recompute + 1)
                    bar.unit = "layer"
                    sq = torch.cat([_sq(lw.sweep(x, V[g0:g0 + G], C, lambda: bar.update(1)))
                                    for g0 in range(0, n_dir, G)])
                    del lw
            if sq is None:
                with torch.enable_grad():
                    out = _forward_target(model, x, target)
                    sq = torch.cat([_sq(_vjp(out, x, V[c0:c0 + C], retain=c0 + C < n_dir))
                                    for c0 in _ticking(range(0, n_dir, C), bar)])
                del out
            if target == "argmax_prob":
                per_seq[b] = sq[0].sqrt().cpu().numpy()
            elif method == "exact":
                per_seq[b] = sq.sum(0).sqrt().cpu().numpy()
            else:
                s = sq.cpu().numpy()
                samples[b] = s
                per_seq[b], per_se[b] = hutchinson(s)
            del x, x0, sq, V
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
