"""Measurements on real models: text, Jacobian influence, hooks, cached entry points.

=========================  ==================================================================
:mod:`.text`               offline text (stdlib docstrings) and seeded token windows
:mod:`.jacobian`           Jacobian influence profiles, exact and Hutchinson
:mod:`.hooks`              hooks that collect attention kernels, the norms behind lambda, and
                           attention logits (formulas live in metrics and rollout)
:mod:`.cached`             cached entry points: profile, shared_profile, capture,
                           measured_influence, and rollout predictions from captured data
:mod:`.logits`             attention logits at initialization, cached
:mod:`.retrieval`          key-value and needle retrieval tasks, scores, the link to the prior
:mod:`.train`              small causal transformers trained on the CPU: tasks, remedies
=========================  ==================================================================

Data flows one way: chapters and the ``posbias`` command use this package; it uses
:mod:`posbias_nb.models` and the pure numerics, never the other way round.  Importing it loads
no torch (torch is imported when a measurement runs).

**Bring your own model.**  Any loaded Hugging Face causal LM works::

    from posbias_nb import measure, models
    model, tok, info = models.load("/path/to/hf-model", weights="pretrained")
    ids = measure.text_batch(tok, length=512, batch=8, seed=0)
    prof = measure.influence_profile(model, ids, target="hidden", method="probes", probes=8)
"""
from . import logits, retrieval, train
from .cached import (MODES, capture, library_versions, measured_influence, positional_kernel,
                     predict, profile, shared_profile)
from .hooks import attention_logits, capture_model, n_heads
from .logits import init_logits, key_spread_ratio
from .jacobian import METHODS, PROBE_DISTS, TARGETS, hutchinson, influence_profile
from .text import SOURCES, STDLIB_MODULES, corpus_digest, stdlib_corpus, text_batch

__all__ = [
    "STDLIB_MODULES", "SOURCES", "TARGETS", "METHODS", "PROBE_DISTS", "MODES",
    "stdlib_corpus", "corpus_digest", "text_batch",
    "influence_profile", "hutchinson",
    "capture_model", "attention_logits", "n_heads",
    "profile", "shared_profile", "capture", "measured_influence", "predict",
    "positional_kernel", "library_versions", "init_logits", "key_spread_ratio",
    "logits", "retrieval", "train",
]
