"""The remedy floor: studies that change what the model hears, and judge the change.

===================  ============================================================
:mod:`.lab`          the remedies lab: small models trained from scratch, the arms and
                     their statistics (the study "remedies")
:mod:`.inference`    inference-time remedies measured on the prior, the task and the cost
:mod:`.fix`          ``posbias fix``: choose a remedy on a tuning part, judge it on a test
                     part, its remedy file (a package)
:mod:`.fix_fast`     ``posbias fix --fast``: the ranked prompt remedies' fast path
:mod:`.confirm`      the book's confirmatory study of the prompt remedies
:mod:`.pipeline`     a reorder against a retriever's own order, on a corpus
===================  ============================================================

It imports the base and prompt floors.
"""
