"""The base floor of the studies: what they share and compute no verdict of their own with.

=================  ==============================================================
:mod:`.design`     designs and verdict code locked before their data (the registry)
:mod:`.frozen`     a design's values made read-only, and back
:mod:`.rules`      declared verdict rules applied to an interval
:mod:`.digests`    a chapter's verdict digest, written and compared
:mod:`.history`    a study's design history as a Markdown table
:mod:`.claims`     the chapters' declared verdict rules, one locked table
:mod:`.study`      a model with its codec, prompt and answer ids, examples drawn, a
                   remedy file read, a remedy scored
:mod:`.prompts`    a task file's prompts, a prompt remedy placing documents, the sizes
                   several studies read
:mod:`.pages`      the HTML pages' stylesheet, PNG helper and ``--out`` check
=================  ==============================================================

It imports no study: every floor above imports it.
"""
