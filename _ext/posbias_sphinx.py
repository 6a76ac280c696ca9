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

And the API reference shows a module constant by a short summary of its value
(:func:`short_value`: "a mapping of 12 entries: 'kv', 'qa', …"), not its repr: autodoc would
print a design's whole ``mappingproxy(...)``, 229 of them on one page (issue 64).
"""
import re
from collections.abc import Mapping, Set

from docutils import nodes
from sphinx.ext.autodoc import AttributeDocumenter, DataDocumenter

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


#: The longest value the reference prints as it is; a longer one is summarised.
VALUE_LIMIT = 60


def _a(noun: str) -> str:
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun


def _item(x) -> str:
    if isinstance(x, float):
        return f"{x:.4g}"
    r = repr(x)
    return r if len(r) <= 24 else type(x).__name__


def short_value(obj, limit: int = VALUE_LIMIT) -> str:
    """What the API reference prints for a module constant: its repr where that is at most
    ``limit`` characters (a float rounded to 4 significant digits), else a summary of what it
    holds: a mapping's or a collection's size and its first keys or items (a long one cut
    with "…"), a long string's start and length, any other object its type."""
    if isinstance(obj, bool) or obj is None:
        return repr(obj)
    if isinstance(obj, float):
        return f"{obj:.4g}"
    r = repr(obj)
    if " at 0x" in r:  # an address says nothing to a reader
        return _a(type(obj).__name__)
    if len(r) <= limit and not (isinstance(obj, Mapping) and type(obj) is not dict):
        return r
    if isinstance(obj, str):
        return f"{obj[:limit // 2]!r}… ({len(obj)} characters)"
    if isinstance(obj, Mapping):
        what, items, unit = "a mapping", list(obj.keys()), "entries"
    elif isinstance(obj, (list, tuple, Set)):
        what, items, unit = _a(type(obj).__name__), list(obj), "items"
    else:
        return _a(type(obj).__name__)
    head = f"{what} of {len(items)} {unit}: "
    shown = []
    for x in items:
        t = _item(x)
        if len(head) + len(", ".join(shown + [t])) > limit:
            break
        shown.append(t)
    return head + ", ".join(shown) + (", …" if len(shown) < len(items) else "")


class _ShortValue:
    """Writes :func:`short_value` as the constant's ``:value:`` where autodoc would write its
    repr (the rest of the header, its type, as autodoc writes it)."""

    def should_suppress_value_header(self) -> bool:
        return True

    def add_directive_header(self, sig: str) -> None:
        super().add_directive_header(sig)
        if self.options.get("no-value") or super().should_suppress_value_header():
            return
        if self.options.get("annotation") is not None:
            return
        try:
            self.add_line("   :value: " + short_value(self.object), self.get_sourcename())
        except Exception:  # noqa: BLE001  (a value that cannot be described is left out)
            pass


class ShortDataDocumenter(_ShortValue, DataDocumenter):
    priority = DataDocumenter.priority + 1


class ShortAttributeDocumenter(_ShortValue, AttributeDocumenter):
    priority = AttributeDocumenter.priority + 1


def setup(app):
    app.connect("env-get-outdated", _reread_overview)
    app.connect("doctree-resolved", _figure_alt)
    app.setup_extension("sphinx.ext.autodoc")
    app.add_autodocumenter(ShortDataDocumenter, override=True)
    app.add_autodocumenter(ShortAttributeDocumenter, override=True)
    return {"parallel_read_safe": False, "parallel_write_safe": True}
