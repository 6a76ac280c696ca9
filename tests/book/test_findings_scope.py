"""Each finding of the landing page carries its chapter's scope (issue 64, item 1): the model and
checkpoint, the number of questions or windows, whether a family was declared after the data,
the known caveat.  The scope is one string the chapter glues (``scope_*``) and states in its own
text, and the landing page pastes the same glue, so the two cannot say different things."""
from __future__ import annotations

import re
from pathlib import Path

BOOK = Path(__file__).resolve().parents[2] / "book"
SCOPE_PASTE = re.compile(r"\{glue:text\}`([a-z_]+)\.md::(scope_[a-z0-9_]+)(?::s)?`")


def findings(intro: str) -> list[str]:
    """The numbered items of the landing page's "What the book found"."""
    part = intro.split("## What the book found", 1)[1].split("\n## ", 1)[0]
    part = part.split("\nEvery claim of the two papers", 1)[0]
    return [m.group(0) for m in re.finditer(r"(?ms)^\d+\. .*?(?=^\d+\. |\Z)", part)]


def scope_problems(intro: str, chapter) -> list[str]:
    """What keeps a finding from carrying its chapter's scope: a finding without a scope
    paste, a scope its chapter does not glue, or one the chapter does not state in its own
    text (``chapter(name)`` returns a chapter's source)."""
    out = []
    items = findings(intro)
    if not items:
        return ["no findings"]
    for i, item in enumerate(items, 1):
        pasted = SCOPE_PASTE.findall(item)
        if not pasted:
            out.append(f"finding {i} carries no scope")
        for ch, key in pasted:
            src = chapter(ch)
            if not re.search(rf"glue\(\s*[\"']{key}[\"']", src):
                out.append(f"finding {i}: {ch}.md glues no {key}")
            if not re.search(rf"\{{glue:text\}}`{key}(?::s)?`", src):
                out.append(f"finding {i}: {ch}.md does not state {key} in its own text")
    return out


def test_every_finding_carries_its_chapters_scope():
    intro = (BOOK / "intro.md").read_text()
    assert len(findings(intro)) == 7
    assert scope_problems(intro, lambda ch: (BOOK / f"{ch}.md").read_text()) == []


def test_the_scope_check_finds_a_finding_without_one():
    intro = ("## What the book found\n\n1. **A.** {glue:text}`a.md::scope_x:s` holds.\n"
             "2. **B.** 57 [50, 64] at birth, no scope.\n3. **C.** {glue:text}`c.md::scope_y:s`\n")
    chapters = {"a": 'glue("scope_x", "8 windows")\nScope: {glue:text}`scope_x`.',
                "c": 'glue("scope_y", "14 questions")\n(never stated)'}
    got = scope_problems(intro, chapters.__getitem__)
    assert got == ["finding 2 carries no scope",
                   "finding 3: c.md does not state scope_y in its own text"]
