"""The book's one Sphinx hook: the pages that gather from the chapters are read again whenever
any other page is.  The overview of the verdicts (book/verdicts.md) is then drawn from the records
the chapters have just written (posbias_nb.notebook.verdict_table), never from an earlier
build's, and the introduction's table pastes the chapters' new glue (a cross-document paste is
resolved when the pasting page is written, which an incremental build would otherwise skip).

Sphinx reads pages in sorted order, and book/verdicts sorts after every chapter, so in one build
the chapters run first.  Reading in parallel (``-j``) would break that order: this extension says
it is not safe for parallel reading, so Sphinx reads serially (and warns, which ``-W`` makes an
error).

It also gives every figure's image an alt text where the source gave none: the first sentence of
its caption (a figure drawn by a code cell gets its image's file name from docutils otherwise,
which a screen reader reads out).
"""
import re

from docutils import nodes

OVERVIEW = "book/verdicts"
GATHERING = ("book/intro", OVERVIEW)


def _reread_overview(app, env, added, changed, removed):
    others = (set(added) | set(changed) | set(removed)) - set(GATHERING)
    return [d for d in GATHERING if d in env.found_docs] if others else []


def caption_alt(text: str, limit: int = 240) -> str:
    """The alt text drawn from a caption: its first sentence, whitespace collapsed, at most
    ``limit`` characters (cut at a word)."""
    t = " ".join(text.split())
    m = re.search(r"(?<=[.!?])\s+(?=[A-Z*(])", t)
    first = t[:m.start()] if m else t
    if len(first) > limit:
        first = first[:limit].rsplit(" ", 1)[0] + " …"
    return first


def _figure_alt(app, doctree, docname):
    for fig in doctree.findall(nodes.figure):
        caps = [c for c in fig.findall(nodes.caption)]
        if not caps:
            continue
        for img in fig.findall(nodes.image):
            if not str(img.get("alt", "")).strip():
                img["alt"] = "Figure: " + caption_alt(caps[0].astext())


def setup(app):
    app.connect("env-get-outdated", _reread_overview)
    app.connect("doctree-resolved", _figure_alt)
    return {"parallel_read_safe": False, "parallel_write_safe": True}
