r"""What a model's blocks do, decided by their behaviour on one short batch, never by names.

Chapters :ref:`ch-prediction` (the :math:`\lambda_t` hooks) and :ref:`ch-reproduce` (bring your
own model).  :func:`describe_blocks` runs the model three times on ``length`` random tokens and
establishes:

* **causal or not**: changing the last token leaves every earlier hidden state of every layer
  unchanged (to float rounding);
* **attention or not**: with eager attention, every decoder layer returns attention
  probabilities (state-space and recurrent models return none; hybrids some), and no layer
  mixes positions through anything else: where layer 1 adds two outputs in parallel and both
  change at the last token when the token before it changes (Falcon-H1: attention beside a
  Mamba mixer), the model is a hybrid, refused like one whose layers do not all attend
  (LFM2's short convolutions).  One rule: attention must be the only position mixer.  The
  check is clean at layer 1 only (deeper, every input already carries earlier tokens);
* **sequential or parallel**, and **which module's output the residual stream receives**: for
  each decoder layer, with :math:`x` its input, a submodule whose output :math:`a` (times a
  scalar :math:`c`, fitted, 1 in most models) satisfies :math:`x + c\,a = r` to 1e-5, where
  :math:`r` is the input of a later submodule of the same layer (the residual stream after the
  attention add), is the attention's addition; the layer's first such addition must mix
  positions (its output at the last token changes when the token before it changes).  When no
  single module passes but two outputs together give the layer's residual additions, the block
  is **parallel** (attention beside the MLP or an SSM, from one input): :math:`\lambda` (the
  attention added to :math:`x` alone) is not defined there and is refused, the same way for
  every parallel architecture.

The result is a :class:`BlockDescription`, kept on the model (``model._posbias_blocks``) so it
is decided once; the hooks (:func:`posbias_nb.measure.hooks.capture_model`), the rollout and
the report read it.  What the check cannot verify is refused with its reason.
"""
from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field

import numpy as np

__all__ = ["BlockDescription", "describe_blocks", "require_causal_attention"]

_TOL = 1e-5


@dataclass(frozen=True)
class BlockDescription:
    """The behaviour of a model's blocks (see the module docstring).

    Attributes
    ----------
    causal : bool
    causal_gap : float
        The largest change of an earlier hidden state when the last token changes (relative).
    attention : bool
        Every decoder layer returns attention probabilities.
    layout : str or None
        ``"sequential"``, ``"parallel"``, or None when not decided (no attention, unverifiable).
    residual : tuple of (str, float) or None
        Per layer, the submodule (its name inside the layer) whose output the residual stream
        receives as the attention's addition, and the scalar it is multiplied by.
    reason : str or None
        Why :math:`\\lambda` is refused (None when it is defined).
    """

    causal: bool
    causal_gap: float
    attention: bool
    layout: str | None
    residual: tuple | None = None
    reason: str | None = None
    n_layers: int = 0
    details: dict = field(default_factory=dict, compare=False)

    @property
    def lambda_ok(self) -> bool:
        return self.reason is None and self.residual is not None


def _first_tensor(o):
    import torch

    if isinstance(o, torch.Tensor):
        return o
    if isinstance(o, (tuple, list)) and o and isinstance(o[0], torch.Tensor):
        return o[0]
    return getattr(o, "last_hidden_state", None) if o is not None else None


@contextlib.contextmanager
def _quiet():
    logs = [logging.getLogger(n) for n in ("transformers", "transformers.modeling_utils")]
    old = [g.level for g in logs]
    for g in logs:
        g.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for g, lv in zip(logs, old):
            g.setLevel(lv)


def _ids(model, length, seed):
    import torch

    V = model.get_input_embeddings().num_embeddings
    g = np.random.default_rng([seed, 0xB10C])
    ids = torch.as_tensor(g.integers(0, V, size=(1, length)), dtype=torch.long)
    return ids, V


def _hidden(model, ids):
    import torch

    dev = next(model.parameters()).device
    with torch.no_grad():
        out = model.base_model(input_ids=ids.to(dev), output_hidden_states=True, use_cache=False)
    hs = getattr(out, "hidden_states", None)
    if not hs:
        raise ValueError(f"{model.config.model_type} returns no hidden states: its causality "
                         "cannot be checked")
    return [h.detach().double().cpu() for h in hs]


def _causal_gap(model, ids, V):
    a = _hidden(model, ids)
    ids2 = ids.clone()
    ids2[0, -1] = (ids2[0, -1] + 1) % V
    b = _hidden(model, ids2)
    gap = 0.0
    for x, y in zip(a, b):
        scale = float(x[:, :-1].abs().max()) or 1.0
        gap = max(gap, float((x[:, :-1] - y[:, :-1]).abs().max()) / scale)
    return gap


def _returns_attention(model, ids, T):
    import torch

    old = getattr(model.config, "_attn_implementation", None)
    dev = next(model.parameters()).device
    try:
        with _quiet():
            try:
                model.set_attn_implementation("eager")
            except (ValueError, AttributeError, TypeError):
                pass
            with torch.no_grad():
                out = model.base_model(input_ids=ids.to(dev), output_attentions=True,
                                       use_cache=False)
    except (TypeError, ValueError, RuntimeError, AttributeError):
        return 0
    finally:
        if old is not None:
            with _quiet(), contextlib.suppress(ValueError, AttributeError, TypeError):
                model.set_attn_implementation(old)
    att = getattr(out, "attentions", None)
    if not att:
        return 0
    return sum(1 for a in att if a is not None and getattr(a, "ndim", 0) == 4)


def _record(model, layers, ids):
    """One pass recording, per layer, its input and output and every submodule's first input
    and first output (tensors of the residual's shape only)."""
    import torch

    store = {t: {"in": {}, "out": {}} for t in range(len(layers))}
    hooks = []

    def pre(t, name):
        def f(mod, args, kwargs):
            x = args[0] if args else kwargs.get("hidden_states")
            if isinstance(x, torch.Tensor):
                store[t]["in"].setdefault(name, x.detach().double().cpu())
        return f

    def post(t, name):
        def f(mod, args, out):
            o = _first_tensor(out)
            if isinstance(o, torch.Tensor):
                store[t]["out"].setdefault(name, o.detach().double().cpu())
        return f

    for t, layer in enumerate(layers):
        for name, mod in layer.named_modules():
            hooks.append(mod.register_forward_pre_hook(pre(t, name), with_kwargs=True))
            hooks.append(mod.register_forward_hook(post(t, name)))
    dev = next(model.parameters()).device
    try:
        with torch.no_grad():
            model.base_model(input_ids=ids.to(dev), use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    return store


def _close(a, b, scale):
    return float((a - b).abs().max()) <= _TOL * scale


def _fit(target, o):
    """The scalar c minimising |target - c o|, and the residual's max norm."""
    den = float((o * o).sum())
    if den == 0:
        return 0.0, float(target.abs().max())
    c = float((target * o).sum()) / den
    return c, float((target - c * o).abs().max())


def _layer_add(rec, shape):
    """(name, c) of the layer's first residual addition, or (None, why)."""
    x, y = rec["in"][""], rec["out"][""]
    scale = max(float(x.abs().max()), float(y.abs().max()), 1e-30)
    outs = {n: o for n, o in rec["out"].items() if n and o.shape == shape}
    mids = {n: i.reshape(shape) for n, i in rec["in"].items()
            if n and i.numel() == x.numel() and i.shape[-1] == shape[-1]}  # OPT flattens tokens
    mids = {n: i for n, i in mids.items() if not _close(i, x, scale)}
    found = []
    for n, o in outs.items():
        if float(o.abs().max()) == 0:
            continue
        for m, r in mids.items():
            if m == n or m.startswith(n + ".") or n.startswith(m + "."):
                continue
            c, res = _fit(r - x, o)
            if res <= _TOL * scale and abs(c) > 1e-6:
                found.append((n.count("."), len(n), n, c, m))
                break
    if found:
        found.sort()
        _, _, n, c, m = found[0]
        return n, c, m
    # parallel: two outputs that together give y - x or a later input minus x
    targets = [y] + list(mids.values())
    names = list(outs)
    for t in targets:
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                if a.startswith(b + ".") or b.startswith(a + "."):
                    continue
                oa, ob = outs[a].reshape(-1), outs[b].reshape(-1)
                M = np.stack([oa.numpy(), ob.numpy()], 1)
                coef, *_ = np.linalg.lstsq(M, (t - x).reshape(-1).numpy(), rcond=None)
                res = float(np.abs((t - x).reshape(-1).numpy() - M @ coef).max())
                if res <= _TOL * scale and np.all(np.abs(coef) > 1e-6):
                    return None, "parallel", (a, b)
    return None, "unverified", None


def describe_blocks(model, length: int = 6, seed: int = 0) -> BlockDescription:
    """Decide the block description of ``model`` by its behaviour (module docstring), once:
    the result is kept on the model and returned again on later calls.

    Raises
    ------
    ValueError
        A model whose layer stack cannot be found, or that returns no hidden states.
    """
    d = getattr(model, "_posbias_blocks", None)
    if isinstance(d, BlockDescription):
        return d
    key = _config_key(model, length, seed)
    if key is not None and key in _MEMO:  # the same code and config: the same blocks
        return _keep(model, _MEMO[key])
    d = _describe(model, length, seed)
    if key is not None:
        _MEMO[key] = d
    return d


#: Descriptions already decided in this process, by (class, config, library version): the
#: structure of a block is a function of its code and config, and a forward pass streams every
#: weight (seconds for a 0.5B model on a CPU), so each architecture is checked once.
_MEMO: dict = {}


def _config_key(model, length, seed):
    import hashlib
    import json

    try:
        import transformers

        cfg = model.config.to_dict()
        for k in ("_attn_implementation", "_attn_implementation_internal", "_name_or_path",
                  "name_or_path", "transformers_version", "dtype", "torch_dtype"):
            cfg.pop(k, None)
        text = json.dumps(cfg, sort_keys=True, default=str)
    except (TypeError, ValueError, AttributeError):
        return None
    return (type(model).__name__, hashlib.sha256(text.encode()).hexdigest(),
            transformers.__version__, int(length), int(seed))


def _describe(model, length: int, seed: int) -> BlockDescription:
    import torch

    from .patches import decoder_layers

    ids, V = _ids(model, int(length), seed)
    with _quiet():
        gap = _causal_gap(model, ids, V)
    causal = gap <= 1e-6
    kind = model.config.model_type
    try:
        layers = decoder_layers(model)
    except ValueError:
        layers = None
    if not causal:
        why = (f"{kind} is not causal: changing the last token moves earlier hidden states "
               f"by {gap:.1e} (an encoder or bidirectional model); these measurements are "
               "for causal decoders")
        if layers is None:
            return _keep(model, BlockDescription(False, gap, False, None, None, why, 0))
    if layers is None:
        d = BlockDescription(causal, gap, False, None, None,
                             f"{kind}: no stack of decoder layers to read", 0)
        return _keep(model, d)
    T = len(layers)
    n_att = _returns_attention(model, ids, T)
    attention = n_att == T
    if not causal:
        why = (f"{kind} is not causal: changing the last token moves earlier hidden states "
               f"by {gap:.1e} (an encoder or bidirectional model); these measurements are "
               "for causal decoders")
        return _keep(model, BlockDescription(False, gap, attention, None, None, why, T))
    if not attention:
        why = (f"{kind} is not an attention model: {n_att} of its {T} layers return attention "
               "probabilities (a state-space, recurrent or hybrid model), so the attention "
               "theory and these measurements do not apply")
        return _keep(model, BlockDescription(True, gap, False, None, None, why, T))
    with _quiet():
        rec = _record(model, layers, ids)
    shape = rec[0]["in"][""].shape
    per, details = [], {}
    for t in range(T):
        name, c, extra = _layer_add(rec[t], shape)
        details[t] = extra  # the module that reads the residual after the add (or the pair)
        if name is None:
            if c == "parallel" and t == 0:
                mixers = _mixing(model, layers, rec, ids, V, extra)
                if len(mixers) > 1:  # attention and another position mixer side by side
                    why = (f"{kind} is not an attention model: layer 1 mixes positions through "
                           f"{' and '.join(mixers)} side by side (a hybrid: attention beside a "
                           "state-space, convolution or recurrent mixer), so the attention "
                           "theory and these measurements do not apply")
                    return _keep(model, BlockDescription(True, gap, False, None, None, why, T,
                                                         details))
            if c == "parallel":
                why = (f"{kind} adds attention and another block ({extra[0]}, {extra[1]}) to "
                       "the residual stream in parallel, from one input: lambda (attention "
                       "added to x alone) is not defined for parallel blocks")
                return _keep(model, BlockDescription(True, gap, True, "parallel", None, why, T,
                                                     details))
            why = (f"{kind}, layer {t + 1}: no submodule's output, added to the layer's input, "
                   "gives the residual stream the rest of the layer reads: the attention's "
                   "addition cannot be verified, so lambda is refused")
            return _keep(model, BlockDescription(True, gap, True, None, None, why, T, details))
        per.append((name, 1.0 if abs(c - 1.0) < 1e-4 else float(c)))
    # the first addition must mix positions: its output at the last token moves when the token
    # before it changes (layer 1, where the input at the last token does not)
    ids2 = ids.clone()
    ids2[0, -2] = (ids2[0, -2] + 1) % V
    with _quiet():
        rec2 = _record(model, layers[:1], ids2)
    a1, a2 = rec[0]["out"][per[0][0]], rec2[0]["out"][per[0][0]]
    scale = max(float(a1.abs().max()), 1e-30)
    if _close(a1[:, -1], a2[:, -1], scale):
        why = (f"{kind}: the first residual addition of layer 1 ({per[0][0]}) does not mix "
               "positions, so it is not attention: lambda is refused")
        return _keep(model, BlockDescription(True, gap, True, None, None, why, T, details))
    return _keep(model, BlockDescription(True, gap, True, "sequential", tuple(per), None, T,
                                         details))


def _mixing(model, layers, rec, ids, V, pair) -> list:
    """Which of the two parallel outputs of layer 1 mix positions: those whose output at the
    last token changes when the token before it changes (at layer 1 nothing else can carry
    that change to the last token)."""
    ids2 = ids.clone()
    ids2[0, -2] = (ids2[0, -2] + 1) % V
    with _quiet():
        rec2 = _record(model, layers[:1], ids2)
    out = []
    for n in pair:
        a1, a2 = rec[0]["out"][n], rec2[0]["out"][n]
        if not _close(a1[:, -1], a2[:, -1], max(float(a1.abs().max()), 1e-30)):
            out.append(n)
    return out


def _keep(model, d):
    try:
        object.__setattr__(model, "_posbias_blocks", d)
    except (AttributeError, TypeError):  # pragma: no cover
        pass
    return d


def require_causal_attention(model) -> BlockDescription:
    """The block description, or ValueError (one line) for a model these measurements do not
    apply to: not causal, or not an attention model in every layer."""
    d = describe_blocks(model)
    if not d.causal or not d.attention:
        raise ValueError(d.reason)
    return d
