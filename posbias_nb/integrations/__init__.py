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


def prompt_remedy(remedy_file, model):
    """The checked prompt remedy of ``remedy_file`` for ``model``, as both integrations read it:
    ``(path, model, remedy name, params)``.  ValueError naming the file when it is not a remedy
    file, when its remedy patches the network, or when it was made for another model."""
    import os
    from pathlib import Path

    from ..models import remedy_file as rf

    path = Path(remedy_file)
    model = os.fspath(model) if isinstance(model, os.PathLike) else model
    spec = rf.read(path)
    if spec["remedy"] not in rf.PROMPT_REMEDIES:
        raise ValueError(f"{path.name} holds {spec['remedy']}, which patches the model, "
                         "not the prompt: apply it with posbias_nb.models.remedy")
    rf.check_model(spec, path, name=model)
    return path, model, spec["remedy"], dict(spec["params"])
