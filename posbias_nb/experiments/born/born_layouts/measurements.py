"""The layouts study's measurements, each cached: a study model's layout decided by
behaviour (namespace ``layouts-layout``), its Jacobian profiles at random init
(:func:`posbias_nb.measure.cached.profile`), and the Gemma-3 ablation's profiles with one
departure switched off (namespace ``layouts-ablation``)."""
from __future__ import annotations

import dataclasses

import numpy as np

from .... import cache, models, theory
from ....measure import cached, entry
from .config import _LAYOUT_DEF, DEFINITION, DESIGN, SWITCHES, _checked, study_spec

__all__ = ["layout", "measure", "switch_off", "ablation"]


def layout(name: str) -> theory.Layout:
    """The study model's layout, decided by behaviour (:func:`posbias_nb.models.model_layout`
    at the study length), cached."""
    spec = study_spec(name)
    L = int(DESIGN["models"][name]["length"])
    info = models.describe(spec)
    params = {"model": spec.name, "fingerprint": info["fingerprint"], "length": L,
              "def": _LAYOUT_DEF, **entry.library_versions()}

    def compute():
        # the model that measure() profiles (memoised: one initialisation, loaded once);
        # model_layout switches it to eager attention for its check and back
        m, _, _ = entry.profile_model(spec, "random", int(DESIGN["seed"]))
        found = models.model_layout(m, length=L)
        # the kinds as text, the sinks as floats: a sink logit is read from float32 attention
        # rows, so it moves in its 7th digit with the machine and the thread count, and the
        # recorded-entry check (cache.agree) compares floats to a tolerance, text exactly
        kinds = theory.Layout(tuple(dataclasses.replace(x, sink=None) for x in found.layers))
        sinks = np.array([np.nan if x.sink is None else x.sink for x in found.layers])
        return {"layout": np.asarray(str(kinds)), "sinks": sinks}

    got = cache.cached("layouts-layout", params, compute)
    kinds = theory.parse_layout(str(got["layout"]))
    sinks = np.asarray(got["sinks"], dtype=float)
    if len(sinks) != kinds.depth:
        raise RuntimeError(f"layouts-layout entry of {name!r}: {len(sinks)} sinks for "
                           f"{kinds.depth} layers")
    return theory.Layout(tuple(x if np.isnan(s) else dataclasses.replace(x, sink=float(s))
                               for x, s in zip(kinds.layers, sinks)))


def measure(name: str, init_seed: int | None = None) -> np.ndarray:
    """The study model's measured profiles at random init, ``(windows, L)``: the initialisation
    ``init_seed`` (default: the design's ``seed``) read on the design's windows and probes."""
    spec = study_spec(name)
    d = DESIGN
    res = cached.profile(spec, "random", length=int(d["models"][name]["length"]),
                         probes=int(d["probes"]), batch=int(d["windows"]), seed=int(d["seed"]),
                         progress=False, init_seed=init_seed)
    return np.asarray(res["per_sequence"], dtype=np.float64)


def switch_off(model, switch: str) -> None:
    """Turn one departure of the Gemma-3 block off, in place (:data:`SWITCHES`).

    Raises
    ------
    ValueError
        An unknown switch, or a model without the Gemma-3 parts the switch names (the patch
        would otherwise change nothing, silently).
    """
    import torch

    if switch not in SWITCHES:
        raise ValueError(f"unknown switch {switch!r}: use one of {', '.join(SWITCHES)}")
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    try:
        every = switch == "all"
        if every or switch == "qk_norm":
            for layer in layers:
                layer.self_attn.q_norm, layer.self_attn.k_norm  # noqa: B018  (both must exist)
                layer.self_attn.q_norm = torch.nn.Identity()
                layer.self_attn.k_norm = torch.nn.Identity()
        if every or switch == "rope_bases":
            r = inner.rotary_emb
            with torch.no_grad():
                for kind in ("inv_freq", "original_inv_freq"):
                    getattr(r, f"sliding_attention_{kind}").copy_(
                        getattr(r, f"full_attention_{kind}"))
        if every or switch == "embed_scale":
            with torch.no_grad():
                inner.embed_tokens.embed_scale.fill_(1.0)
        if every or switch == "sandwich_norms":
            for layer in layers:
                layer.post_attention_layernorm, layer.post_feedforward_layernorm  # noqa: B018
                layer.post_attention_layernorm = torch.nn.Identity()
                layer.post_feedforward_layernorm = torch.nn.Identity()
    except (AttributeError, TypeError) as e:
        raise ValueError(f"switch {switch!r} needs a Gemma-3 text model: {e}") from None


def ablation(switch: str) -> np.ndarray:
    """The measured profiles ``(windows, L)`` of the design's ablation model (Gemma-3 as shipped,
    random init, the design's ablation seed) with ``switch`` off: the same windows and probes as
    :func:`measure`, cached (namespace ``layouts-ablation``)."""
    from ....measure.jacobian import influence_profile
    from ....tasks.text import text_batch

    d = _checked()
    ab = d["ablations"]
    if switch not in ab["switches"]:
        raise ValueError(f"switch {switch!r} is not in the design: {', '.join(ab['switches'])}")
    name = ab["model"]
    spec = study_spec(name)
    L, seed, init = int(d["models"][name]["length"]), int(d["seed"]), int(ab["init_seed"])
    info = models.describe(spec)
    params = {"model": spec.name, "fingerprint": info["fingerprint"], "length": L,
              "windows": int(d["windows"]), "probes": int(d["probes"]), "seed": seed,
              "init_seed": init, "switch": switch, "def": DEFINITION, **entry.library_versions()}

    def compute():
        import torch

        m, tok, _ = models.load(spec, weights="random", seed=init, attn="sdpa")
        ids = text_batch(tok, L, int(d["windows"]), seed=seed,
                         vocab_size=m.get_input_embeddings().num_embeddings)
        one = torch.as_tensor(np.asarray(ids[:1]), dtype=torch.long)
        with torch.no_grad():
            before = m(one).logits
        switch_off(m, switch)
        with torch.no_grad():
            after = m(one).logits
        if torch.equal(before, after):  # checked by behaviour: the switch must change the model
            raise RuntimeError(f"switching {switch!r} off left the model's output unchanged")
        res = influence_profile(m, ids, probes=int(d["probes"]), seed=seed, progress=False)
        return {"per_window": res["per_sequence"]}

    return np.asarray(cache.cached("layouts-ablation", params, compute)["per_window"],
                      dtype=np.float64)
