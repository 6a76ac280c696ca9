r"""Teacher-forced scoring of an answer: log-probability and greedy exact match.

Chapter *From prior to behaviour*, eq. ``eq-ret-logprob``.  Used by
:mod:`posbias_nb.experiments.retrieval`; torch is imported when a score is computed.
"""
from __future__ import annotations

__all__ = ["score", "answer_logits"]


def answer_logits(model, hidden):
    """Output logits of ``hidden`` states (float32), with the model's final soft-capping."""
    import torch

    logits = model.get_output_embeddings()(hidden)
    cap = getattr(model.config, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return logits.float()


def score(model, prompt_ids, answer_ids) -> tuple[float, bool]:
    r"""Teacher-forced log-probability of the answer and greedy exact match (eq.
    ``eq-ret-logprob``, chapter *From prior to behaviour*): one forward pass over
    ``prompt_ids + answer_ids``; logits only at the ``m`` answer-predicting positions."""
    import torch

    p, a = list(map(int, prompt_ids)), list(map(int, answer_ids))
    if len(p) < 1 or len(a) < 1:
        raise ValueError(f"prompt and answer must be non-empty, got {len(p)} and {len(a)} ids")
    device = next(model.parameters()).device
    ids = torch.tensor([p + a], dtype=torch.long, device=device)
    with torch.no_grad():
        h = model.base_model(input_ids=ids, use_cache=False).last_hidden_state[0]
        lp = torch.log_softmax(answer_logits(model, h[len(p) - 1:len(p) + len(a) - 1]).double(), -1)
    tgt = torch.tensor(a, device=device)
    logprob = float(lp.gather(1, tgt[:, None]).sum())
    correct = bool((lp.argmax(-1) == tgt).all())
    return logprob, correct
