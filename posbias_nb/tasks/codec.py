"""Text to token ids and back for one tokenizer, with its chat template: what every study that
scores prompts encodes with (the key-value and needle prompts, the real questions, the user's
task files, ``posbias fix``).  A model without a tokenizer reads UTF-8 bytes.  This module imports
no torch: a tokenizer is only called.

:class:`Codec` renders a user message through the tokenizer's chat template where it has one
(the answer's lead after the generation prompt), encodes with character offsets, decodes
generated ids and counts tokens; :func:`token_span` turns a character range into the token
range that covers it.
"""
from __future__ import annotations

__all__ = ["Codec", "token_span"]


class _Codec:
    """Text -> ids for one tokenizer (or bytes), with the chat template where there is one."""

    def __init__(self, tok, vocab_size: int):
        self.tok = tok
        self.vocab = int(vocab_size)
        self.chat = bool(tok is not None and getattr(tok, "chat_template", None))

    def render(self, content: str, lead: str = "") -> tuple[str, int]:
        """(full prompt text, offset of ``content`` inside it); ``lead`` starts the answer
        (after the generation prompt of a chat template, after a space otherwise)."""
        if not self.chat:
            return content + (" " + lead if lead else ""), 0
        text = self.tok.apply_chat_template([{"role": "user", "content": content}],
                                            tokenize=False, add_generation_prompt=True)
        return text + lead, text.index(content)

    def encode(self, text: str, prompt: bool) -> tuple[list[int], list[tuple[int, int]]]:
        """Ids and character offsets; special tokens only for a prompt without template."""
        if self.tok is None:
            ids, offs = [], []
            for i, ch in enumerate(text):
                for b in ch.encode("utf-8"):
                    ids.append(b % self.vocab)
                    offs.append((i, i + 1))
            return ids, offs
        special = prompt and not self.chat
        enc = self.tok(text, add_special_tokens=special, return_offsets_mapping=True)
        return list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]

    def decode(self, ids) -> str:
        """Text of generated ids (bytes: ids below 256 read as UTF-8, invalid bytes dropped)."""
        ids = [int(i) for i in ids]
        if self.tok is None:
            return bytes(i for i in ids if 0 <= i < 256).decode("utf-8", errors="ignore")
        return self.tok.decode(ids, skip_special_tokens=True)

    def count(self, text: str) -> int:
        return len(self.encode(text, prompt=False)[0])


#: Text -> ids for one tokenizer, with its chat template (what the experiments encode with).
#: The class keeps the name it was recorded under (a class's name is part of the code digest of
#: every namespace that encodes with it: renaming it would re-measure them all).
Codec = _Codec


def token_span(offsets, c0: int, c1: int) -> tuple[int, int]:
    """Token range [t0, t1) whose characters overlap [c0, c1)."""
    hit = [i for i, (a, b) in enumerate(offsets) if b > c0 and a < c1 and b > a]
    if not hit:
        raise ValueError("the gold value was not found among the prompt's tokens")
    return hit[0], hit[-1] + 1
