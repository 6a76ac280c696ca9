r"""Retrieval prompts: key-value (Liu et al. 2023) and needle in a haystack, pure data.

Chapter *From prior to behaviour* (``book/retrieval.md``); the experiment that scores them is
:mod:`posbias_nb.experiments.prompt.retrieval` (its module docstring states the prompt formats, the
length rule and the answer leads).  Each prompt set is built so that **only the position of the
gold item changes** from one prompt to the next.  This module imports no torch: a tokenizer is
only called, and a model without one reads UTF-8 bytes.
"""
from __future__ import annotations

import re
import uuid
from functools import lru_cache

import numpy as np

from .._validate import choice, positive_int
from .codec import Codec, token_span

__all__ = ["TASKS", "VARIANTS", "KV_INSTRUCTION", "NEEDLE_INSTRUCTION", "kv_pairs", "kv_prompt",
           "slot_items", "haystack_sentences", "needle_prompt", "build_prompts", "check_args",
           "DUMMY_PAIR", "dummy_prompts"]

TASKS = ("kv", "needle")
#: ``"hex"``: the chapter's fast task (8-hex-digit keys and values, a forced opening quote,
#: teacher-forced scoring); ``"liu"``: Liu et al.'s own setting (UUID keys and values, no lead,
#: greedy generation scored by substring match; kv only).
VARIANTS = ("hex", "liu")
KV_INSTRUCTION = "Extract the value corresponding to the specified key in the JSON object below."
NEEDLE_INSTRUCTION = ("Read the text below. Somewhere in it is a secret code; "
                      "answer the question about it.")
_HEX = "0123456789abcdef"
_HEX_LEN = 8

# --------------------------------------------------------------------------------------------
# Prompt construction (pure: no torch)


def _hexes(rng, count: int, taken: set) -> list[str]:
    out = []
    while len(out) < count:
        s = "".join(rng.choice(list(_HEX), size=_HEX_LEN))
        if s not in taken:
            taken.add(s)
            out.append(s)
    return out


def _uuids(rng, count: int, taken: set) -> list[str]:
    out = []
    while len(out) < count:
        s = str(uuid.UUID(bytes=rng.bytes(16), version=4))
        if s not in taken:
            taken.add(s)
            out.append(s)
    return out


def kv_pairs(n_pairs: int, rng, kind: str = "hex") -> list[tuple[str, str]]:
    """``n_pairs`` random (key, value) pairs; all strings distinct.

    ``kind="hex"``: 8 lower-case hex digits (the chapter's fast task).  ``kind="uuid"``: random
    version-4 UUID strings as Liu et al. (2023) use, drawn from the seeded ``rng``
    (``uuid.UUID(bytes=rng.bytes(16), version=4)``, so the version and variant bits are set).

    Examples
    --------
    >>> import numpy as np, uuid
    >>> (k, v), = kv_pairs(1, np.random.default_rng(0), kind="uuid")
    >>> uuid.UUID(k).version, len(v)
    (4, 36)
    """
    choice("kind", kind, ("hex", "uuid"))
    draw = _hexes if kind == "hex" else _uuids
    taken: set = set()
    keys = draw(rng, n_pairs, taken)
    vals = draw(rng, n_pairs, taken)
    return list(zip(keys, vals))


def kv_prompt(pairs, key: str) -> str:
    """The key–value retrieval prompt of Liu et al. (2023) for ``pairs`` and the asked ``key``
    (chapter *From prior to behaviour*)."""
    pairs = list(pairs)
    if len(pairs) < 1:
        raise ValueError(f"kv_prompt needs at least one pair, got {pairs!r}")
    if key not in [k for k, _ in pairs]:
        raise ValueError(f"key {key!r} is not among the pairs")
    rows = []
    for i, (k, v) in enumerate(pairs):
        rows.append(("{" if i == 0 else " ") + f'"{k}": "{v}"'
                    + ("}" if i == len(pairs) - 1 else ","))
    return (f"{KV_INSTRUCTION}\n\nJSON data:\n" + "\n".join(rows)
            + f'\n\nKey: "{key}"\nCorresponding value:')


def slot_items(n_items: int, positions: int) -> np.ndarray:
    """Item index of each of the ``positions`` gold slots: ``round(k (n-1)/(P-1))``, first and
    last always included.  ValueError if two slots would share an item (``n_items < P``)."""
    positions = positive_int("positions", positions, minimum=2)
    n_items = positive_int("n_items", n_items, minimum=1)
    idx = np.rint(np.arange(positions) * (n_items - 1) / (positions - 1)).astype(int)
    if len(set(idx.tolist())) != positions:
        raise ValueError(f"length too small: {n_items} items cannot hold {positions} distinct "
                         "gold positions (raise the length or lower the positions)")
    return idx


@lru_cache(maxsize=1)
def haystack_sentences() -> tuple[str, ...]:
    """The sentences of :func:`posbias_nb.measure.stdlib_corpus`, whitespace collapsed, split
    after ``.``, ``!`` or ``?``; those of 20 to 300 characters that contain no hex-like 8-letter
    word are kept, in corpus order."""
    from .text import stdlib_corpus  # noqa: PLC0415 (same layer, pure)

    text = " ".join(stdlib_corpus().split())
    out = []
    for s in re.split(r"(?<=[.!?])\s+", text):
        if 20 <= len(s) <= 300 and not re.search(r"\b[0-9a-f]{8}\b", s):
            out.append(s)
    return tuple(out)


def needle_prompt(sentences, depth_index: int, key: str, value: str) -> str:
    """The needle prompt: instruction, the haystack ``sentences`` with the needle inserted
    before sentence ``depth_index`` (``len(sentences)``: after the last), the question."""
    sentences = list(sentences)
    if not 0 <= depth_index <= len(sentences):
        raise ValueError(f"depth_index must lie in 0..{len(sentences)}, got {depth_index!r}")
    body = sentences[:depth_index] + [_needle(key, value)] + sentences[depth_index:]
    return (f"{NEEDLE_INSTRUCTION}\n\n" + " ".join(body)
            + f"\n\nQuestion: What is the secret code for {key}?\nAnswer:")


def _needle_lead(key: str) -> str:
    return f"The secret code for {key} is"


def _needle(key: str, value: str) -> str:
    return f"The secret code for {key} is {value}."


def check_args(task, positions, examples, length, seed, variant="hex"):
    """Validate the arguments of a retrieval run; return them as ints (ValueError naming a bad one)."""
    choice("task", task, TASKS)
    choice("variant", variant, VARIANTS)
    if variant == "liu" and task != "kv":
        raise ValueError(f"variant 'liu' is Liu et al.'s key-value task: task must be 'kv', "
                         f"got {task!r}")
    positions = positive_int("positions", positions, minimum=2)
    examples = positive_int("examples", examples, minimum=1)
    length = positive_int("length", length, minimum=2)
    seed = positive_int("seed", seed, minimum=0)
    return task, positions, examples, length, seed


def build_prompts(tokenizer, task: str, positions: int, examples: int, length: int,
                  seed: int = 0, vocab_size: int | None = None, variant: str = "hex") -> dict:
    """All prompts of a run: ``examples x positions`` records, example-major.

    Parameters
    ----------
    tokenizer : Hugging Face tokenizer or None
        None reads bytes (needs ``vocab_size``).
    task, positions, examples, length, seed :
        As in :func:`retrieval_run` (module docstring: the length rule).
    variant : {"hex", "liu"}
        ``"hex"``: 8-hex-digit keys and values, the answer started by the opening quote.
        ``"liu"`` (kv only): UUID keys and values (:func:`kv_pairs` ``kind="uuid"``), the prompt
        ends at ``Corresponding value:`` (after the chat template's generation prompt where
        there is one) with no lead, as in Liu et al.; ``answer_ids`` is then the bare value.

    Returns
    -------
    dict
        ``records``: list of dicts with ``example``, ``gold_index`` (slot ``k``), ``item`` (the
        gold item's index among the ``n_items``), ``content`` (task text), ``text`` (rendered
        prompt), ``prompt_ids``, ``answer_ids``, ``value``, ``span`` (token range of the gold
        value in the prompt), for kv ``pair_spans`` (token range of every pair ``"k": "v"``,
        in the object's order) and ``pairs`` (the pairs in that order); ``n_items``, ``items``
        (slot -> item), ``chat`` (bool).

    Raises
    ------
    ValueError
        Unknown task, ``positions < 2``, ``examples < 1``, a length too small for ``positions``
        distinct items, ``vocab_size`` missing for bytes.
    """
    task, positions, examples, length, seed = check_args(task, positions, examples, length,
                                                          seed, variant)
    kind, lead = ("uuid", "") if variant == "liu" else ("hex", '"')
    if tokenizer is None and vocab_size is None:
        raise ValueError("a byte-level prompt (tokenizer None) needs vocab_size")
    codec = Codec(tokenizer, vocab_size if vocab_size is not None else len(tokenizer))
    rngs = [np.random.default_rng([seed, e, 0x5E7]) for e in range(examples)]
    records = []
    if task == "kv":
        probe = kv_pairs(8, np.random.default_rng([seed, 0, 0x5E7]), kind)

        def tokens(pairs):
            return len(codec.encode(codec.render(kv_prompt(pairs, pairs[0][0]), lead)[0],
                                    True)[0])

        t2, t8 = tokens(probe[:2]), tokens(probe)
        per = max((t8 - t2) / 6.0, 1e-9)
        n = 2 + int(round((length - t2) / per))
        if n < 2:
            raise ValueError(f"length {length} is too small for the kv task: two pairs already "
                             f"take {t2} tokens")
        if n < positions:
            raise ValueError(f"length {length} is too small for {positions} gold positions in "
                             f"the kv task: it holds {n} pairs")
        items = slot_items(n, positions)
        sets = [kv_pairs(n, r, kind) for r in rngs]
        for e, pairs in enumerate(sets):
            gold, others = pairs[0], pairs[1:]
            for k, it in enumerate(items):
                order = others[:it] + [gold] + others[it:]
                content = kv_prompt(order, gold[0])
                c0 = _value_at(content, gold)
                slots = [(_value_at(content, order[j]),
                          _value_at(content, order[j]) + len(order[j][1])) for j in items]
                rec = _record(codec, e, k, int(it), content, gold[1], c0, answer=gold[1],
                              lead=lead, slots=slots)
                rec["pair_spans"] = _pair_spans(codec, rec["text"], content, order)
                rec["pairs"] = list(order)
                records.append(rec)
    else:
        sents = haystack_sentences()
        t0 = len(codec.encode(codec.render(needle_prompt([], 0, "0a1b2c3d", "4e5f6a7b"),
                                           _needle_lead("0a1b2c3d"))[0], True)[0])
        budget = length - t0
        if budget < positions:
            raise ValueError(f"length {length} is too small for the needle task: the prompt "
                             f"without haystack already takes {t0} tokens")
        for e, rng in enumerate(rngs):
            key, value = _hexes(rng, 2, set())
            start = int(rng.integers(0, len(sents)))
            hay, used = [], 0
            i = start
            while used < budget and len(hay) < len(sents):
                s = sents[i % len(sents)]
                used += codec.count(" " + s)
                hay.append(s)
                i += 1
            if len(hay) + 1 < positions:
                raise ValueError(f"length {length} is too small for {positions} gold positions "
                                 f"in the needle task: the haystack holds {len(hay)} sentences")
            items = slot_items(len(hay) + 1, positions)
            for k, it in enumerate(items):
                content = needle_prompt(hay, int(it), key, value)
                needle = _needle(key, value)
                c0 = content.index(needle) + len(needle) - len(value) - 1
                body = hay[:it] + [needle] + hay[it:]
                starts = np.cumsum([0] + [len(b) + 1 for b in body]) + len(NEEDLE_INSTRUCTION) + 2
                slots = []
                for j, jt in enumerate(items):
                    if j == k:
                        slots.append((c0, c0 + len(value)))
                    else:  # the haystack sentence that starts at this slot's boundary
                        i = min(int(jt), len(hay) - 1)
                        b = i if i < it else i + 1
                        slots.append((int(starts[b]), int(starts[b]) + len(body[b])))
                records.append(_record(codec, e, k, int(it), content, value, c0,
                                       answer=" " + value, lead=_needle_lead(key), slots=slots))
        n = None
    n_items = n if task == "kv" else None
    return {"records": records, "n_items": n_items, "chat": codec.chat, "codec": codec,
            "variant": variant,
            "items": [int(r["item"]) for r in records[:positions]]}


#: The dummy document of the attention calibration (Hsieh et al. 2024): one fixed key-value
#: pair, drawn once like the task's own (8 hex digits each).
DUMMY_PAIR = tuple(kv_pairs(1, np.random.default_rng(0xD0C))[0])


def dummy_prompts(prompts: dict, record: dict, dummy=DUMMY_PAIR) -> list[dict]:
    """For each document (key-value pair) ``k`` of a kv ``record`` of ``prompts`` (what
    :func:`build_prompts` returns), the same prompt with that pair replaced, in place, by the
    ``dummy`` pair (Hsieh et al.'s "dummy document at position k"): a list of ``{"prompt_ids",
    "span"}`` (the token range of the dummy pair ``"k": "v"``), in the object's order.

    Raises
    ------
    ValueError
        A record without ``pairs`` (not kv), or a dummy string that occurs in the prompt.
    """
    if "pairs" not in record:
        raise ValueError("dummy_prompts needs a kv record (with its pairs)")
    dk, dv = dummy
    content = record["content"]
    if dk in content or dv in content:
        raise ValueError(f"the dummy pair {dummy!r} occurs in the prompt")
    codec = prompts["codec"]
    lead = '"' if prompts.get("variant", "hex") == "hex" else ""
    out = []
    for k, v in record["pairs"]:
        old = f'"{k}": "{v}"'
        new = f'"{dk}": "{dv}"'
        c0 = content.index(old)
        alt = content[:c0] + new + content[c0 + len(old):]
        text, off = codec.render(alt, lead)
        ids, offs = codec.encode(text, prompt=True)
        out.append({"prompt_ids": ids, "span": token_span(offs, off + c0, off + c0 + len(new))})
    return out


def _pair_spans(codec, text: str, content: str, pairs) -> list[tuple[int, int]]:
    """Token ranges ``[t0, t1)`` of every key-value pair ``"k": "v"`` of a kv prompt, in the
    order of the JSON object (the unit the task retrieves: one document)."""
    _, off = codec.render(content)
    _, offs = codec.encode(text, prompt=True)
    out = []
    for k, v in pairs:
        c0 = content.index(f'"{k}": "{v}"')
        out.append(token_span(offs, off + c0, off + c0 + len(f'"{k}": "{v}"')))
    return out


def _value_at(content: str, pair) -> int:
    return content.index(f'"{pair[0]}": "{pair[1]}"') + len(f'"{pair[0]}": "')


def _record(codec, e, k, item, content, value, c0, answer, lead="", slots=()):
    text, off = codec.render(content, lead)
    ids, offs = codec.encode(text, prompt=True)
    ans, _ = codec.encode(answer, prompt=False)
    span = token_span(offs, off + c0, off + c0 + len(value))
    slot_spans = [token_span(offs, off + a, off + b) for a, b in slots]
    return {"example": e, "gold_index": k, "item": item, "content": content, "text": text,
            "prompt_ids": ids, "answer_ids": ans, "value": value, "span": span,
            "slot_spans": slot_spans}
