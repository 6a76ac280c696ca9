"""Measurements on real models: Jacobian influence, hooks, teacher-forced scores, cached entry
points.

=========================  ==================================================================
:mod:`.jacobian`           Jacobian influence profiles, exact and Hutchinson
:mod:`.hooks`              hooks that collect attention kernels, the norms behind lambda, and
                           attention logits (formulas live in metrics and rollout)
:mod:`.scoring`            teacher-forced log-probability and greedy exact match of an answer
:mod:`.dense`              a dense retriever: all-MiniLM-L6-v2 embeddings and cosine search
:mod:`.entry`              the one entry helper: argument checks, cache keys with library
                           versions, the loaded-model memo
:mod:`.cached`             cached entry points: profile, shared_profile, capture,
                           measured_influence, and rollout predictions from captured data
:mod:`.logits`             attention logits at initialization, cached
:mod:`.positional`         what the inference-time remedies read from a model: attention rows
                           (the positional prior), the positional hidden channel, held-out loss
``spans``                  influence summed over token spans (key-value pairs, documents):
                           ``span_profile``
:mod:`.prefix`             one pass over a prompt reused: what follows a shared prefix is
                           computed alone (the remedies that change only the last rows)
=========================  ==================================================================

The text these measurements read comes from :mod:`posbias_nb.tasks.text` (re-exported here:
:func:`text_batch`, :func:`stdlib_corpus`).  Whole studies built on these measurements (the
retrieval runs, the remedies lab, the replays) live one layer up, in
:mod:`posbias_nb.experiments`.

Data flows one way: chapters, experiments and the ``posbias`` command use this package; it uses
:mod:`posbias_nb.models`, :mod:`posbias_nb.tasks` and the pure numerics, never the other way
round.  Importing it loads no torch (torch is imported when a measurement runs).

**Bring your own model.**  Any loaded Hugging Face causal LM works::

    from posbias_nb import measure, models
    model, tok, info = models.load("/path/to/hf-model", weights="pretrained")
    ids = measure.text_batch(tok, length=512, batch=8, seed=0)
    prof = measure.influence_profile(model, ids, target="hidden", method="probes", probes=8)
"""
from ..tasks.text import SOURCES, STDLIB_MODULES, corpus_digest, stdlib_corpus, text_batch
from . import entry, logits, positional, scoring
from .cached import (MODES, capture, config_kernel, measured_influence, predict, profile,
                     shared_profile)
from .entry import library_versions
from .hooks import attention_logits, capture_model, n_heads
from .jacobian import METHODS, PROBE_DISTS, TARGETS, hutchinson, influence_profile
from .logits import init_logits, key_spread_ratio
from .scoring import score
from .spans import span_profile

__all__ = [
    "STDLIB_MODULES", "SOURCES", "TARGETS", "METHODS", "PROBE_DISTS", "MODES",
    "stdlib_corpus", "corpus_digest", "text_batch",
    "influence_profile", "hutchinson", "score",
    "capture_model", "attention_logits", "n_heads",
    "profile", "shared_profile", "capture", "measured_influence", "predict",
    "config_kernel", "library_versions", "init_logits", "key_spread_ratio",
    "span_profile", "entry", "logits", "positional", "scoring",
]
