"""Pure data generators: what the measurements and experiments feed to a model.  No torch.

=========================  ==================================================================
:mod:`.text`               the offline text corpus (stdlib docstrings) and seeded, disjoint
                           token windows
:mod:`.codec`              text to token ids and back for one tokenizer, with its chat
                           template: what every study that scores prompts encodes with
:mod:`.kv_needle`          key-value and needle-in-a-haystack retrieval prompts, with the gold
                           item moved across positions
:mod:`.synthetic`          the synthetic training data of the remedies lab: token layout,
                           answer placements, batches
:mod:`.qa`                 real questions over real passages (Liu et al.'s multi-document QA),
                           BM25 distractors, and the readers of users' task files
:mod:`.reorder`            remedies in the prompt: where each document goes (LangChain's and
                           Haystack's fixed rules, Liu et al.'s query-aware prompt, orders read
                           from a measured slot quality or an influence prior), BM25 ranking
:mod:`.corpus`             a retrieval corpus (the oracle file's passages, corpus files) and
                           BM25 over it, recall of the gold passage
=========================  ==================================================================

A tokenizer object is only called here; nothing in this package imports torch or a model.
"""
from . import codec, kv_needle, qa, reorder, synthetic, text

__all__ = ["text", "codec", "kv_needle", "synthetic", "qa", "reorder"]
