"""The prompt floor: studies of where in a prompt the answer sits.

===================  ============================================================
:mod:`.retrieval`    retrieval runs (key-value, needle) per gold position, their link to
                     the influence prior
:mod:`.user_task`    ``posbias task``: the gold passage moved across a task file's prompts
:mod:`.realqa`       real questions (Liu et al.'s files): the locked position family
:mod:`.placement`    the prompt remedies measured on a part of the user's examples
:mod:`.headline`     the data of the book's headline figure
===================  ============================================================

It imports the base floor only.
"""
