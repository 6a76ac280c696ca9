"""Integrations with other libraries: adapters that apply this package's results inside
someone else's pipeline.

=========================  ==================================================================
:mod:`.langchain`          :class:`~posbias_nb.integrations.langchain.RemedyCompressor`, a
                           LangChain document compressor (it receives a retrieval chain's
                           query), and :class:`~posbias_nb.integrations.langchain.RemedyReorder`,
                           a document transformer: a retriever's documents placed by a prompt
                           remedy file (``posbias fix``)
:mod:`.haystack`           :class:`~posbias_nb.integrations.haystack.RemedyRanker`, the same as
                           a Haystack 2 component
=========================  ==================================================================

Each module needs an optional extra (``pip install 'posbias-nb[langchain]'``; ``make setup``
installs them all) and is imported by name: this ``__init__`` imports none of them, and nothing
in the package imports this subpackage.
"""
