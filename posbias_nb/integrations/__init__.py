"""Integrations with other libraries: adapters that apply this package's results inside
someone else's pipeline.

=========================  ==================================================================
:mod:`.langchain`          :class:`~posbias_nb.integrations.langchain.RemedyReorder`, a
                           LangChain document transformer that places a retriever's documents
                           by a prompt remedy file (``posbias fix``)
=========================  ==================================================================

Each module needs an optional extra (``pip install 'posbias-nb[langchain]'``; ``make setup``
installs them all) and is imported by name: this ``__init__`` imports none of them, and nothing
in the package imports this subpackage.
"""
