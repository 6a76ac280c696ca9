"""The book's one Sphinx hook: the pages that gather from the chapters are read again whenever
any other page is.  The overview of the verdicts (book/verdicts.md) is then drawn from the records
the chapters have just written (posbias_nb.notebook.verdict_table), never from an earlier
build's, and the introduction's table pastes the chapters' new glue (a cross-document paste is
resolved when the pasting page is written, which an incremental build would otherwise skip).

Sphinx reads pages in sorted order, and book/verdicts sorts after every chapter, so in one build
the chapters run first.  Reading in parallel (``-j``) would break that order: this extension says
it is not safe for parallel reading, so Sphinx reads serially (and warns, which ``-W`` makes an
error).
"""
OVERVIEW = "book/verdicts"
GATHERING = ("book/intro", OVERVIEW)


def _reread_overview(app, env, added, changed, removed):
    others = (set(added) | set(changed) | set(removed)) - set(GATHERING)
    return [d for d in GATHERING if d in env.found_docs] if others else []


def setup(app):
    app.connect("env-get-outdated", _reread_overview)
    return {"parallel_read_safe": False, "parallel_write_safe": True}
