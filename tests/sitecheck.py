"""Checks of the built website's text, shared by the site test (``tests/browser/test_site.py``)
and the unit tests that feed each check a counterexample (``tests/book/test_sitecheck.py``).

- :func:`raw_roles`: a MyST role or glue reference shown as text (``{glue:text}`key```, a role
  whose closing backtick is missing, a glue role swallowed by a code span): a number or a link
  the reader never sees.
- :func:`bad_verdict_grammar`: a decision word glued where the sentence has a verb already ("the
  link is fails", "is holds").
- :func:`smart_dashes`: a command option turned into an en or em dash by the page's smart quotes
  ("posbias fix –model"): it does not paste.
- :func:`posbias_commands`: the ``posbias`` commands shown in code blocks, and in inline code
  that carries a whole command, to be parsed by the CLI's own parser.
- :func:`intervals_missing_estimate`: a printed ``estimate [low, high]`` whose estimate lies
  outside its own interval.
- :func:`bare_reprs`: a cell output that is a bare Python repr (a dict, a list, a tuple of
  ``np.float64``, ``(True, True)``) where the reader should see a table, math or a sentence.
- :func:`hand_formatted`: a number printed by hand where the book's one formatter
  (:func:`posbias_nb.notebook.interval`, :func:`~posbias_nb.notebook.number`) would not print
  it so: a unit inside and after an interval ("70% [58, 80]%"), a signed zero ("-0.00"), a
  one-sided bound with two ends ("one-sided 95% bounds [+0.29, +1.14]"), a float in full
  ("0.014936589462354138"); and :func:`broken_emphasis`: an asterisk inside a word that Markdown
  turned into italics ("5*sliding:512" shown as "5<em>sliding:512").
- :func:`captions_without_what_to_see`: a figure whose caption does not say what to see in it
  (the book's captions end with a sentence that starts "What to see:").
"""
from __future__ import annotations

import re
from html.parser import HTMLParser

#: A role of the book's sources followed by its backtick (shown as text, it was not rendered), or
#: any glue role at all.
ROLE_RE = re.compile(r"\{(numref|ref|eq|cite(:[pt])?|py:[a-z]+|doc|math|download|term)\}`"
                     r"|\{glue(:(text|md|any|figure))?\}")
#: A bare glue role as a whole code element: ```{glue:text}`key``` written inside a code span.
BARE_ROLE_CODE = re.compile(r"^\{glue(:\w+)?\}`?$")
GRAMMAR_RES = [re.compile(r"\b(is|are|was|were|be|been)\s+(holds|fails)\b", re.I),
               re.compile(r"\b(holds|fails)\s+(holds|fails)\b", re.I)]
DASH_OPTION = re.compile(r"(?:^|\s)[\u2013\u2014][a-z][a-z-]+")
_NUM = r"[+\-\u2212]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][+\-\u2212]?\d+)?"
#: ``estimate [low, high]`` as :func:`posbias_nb.notebook.interval` prints it (a unit such as
#: ``%`` or ``×`` may follow each number).
_UNIT = r"[%\u00d7]?"
INTERVAL = re.compile(rf"(?<![\w.])({_NUM}){_UNIT}\s*\[\s*({_NUM}){_UNIT},\s+({_NUM}){_UNIT}\s*\]")
COMMAND_LINE = re.compile(r"^(?:\$\s*)?(?:\S*/)?posbias\s+([a-z]+)(\s.*)?$")


class _Text(HTMLParser):
    """A page's visible prose (outside code), its ``<pre>`` blocks and its inline code."""

    SKIP = {"script", "style", "noscript", "template"}
    VOID = {"br", "img", "meta", "link", "input", "hr", "source", "wbr", "col", "area"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.prose, self.pre, self.code = [], [], [], []
        self._buf = None  # (kind, parts) of the code element open at the top level

    def handle_starttag(self, tag, attrs):
        if tag in self.VOID:
            return
        self.stack.append(tag)
        if tag in ("pre", "code") and self._buf is None:
            self._buf = (tag, [])

    def handle_endtag(self, tag):
        if tag not in self.stack:
            return
        while self.stack:
            t = self.stack.pop()
            if self._buf is not None and t == self._buf[0] and not (
                    {"pre", "code"} & set(self.stack)):
                (self.pre if t == "pre" else self.code).append("".join(self._buf[1]))
                self._buf = None
            if t == tag:
                break

    def handle_data(self, data):
        if self.SKIP & set(self.stack):
            return
        if self._buf is not None:
            self._buf[1].append(data)
        else:
            self.prose.append(data)


def page_parts(html: str) -> dict:
    """``prose`` (the visible text outside code, whitespace collapsed), ``pre`` (code blocks)
    and ``code`` (inline code elements) of an HTML page."""
    p = _Text()
    p.feed(html)
    return dict(prose=re.sub(r"\s+", " ", " ".join(p.prose)), pre=p.pre, code=p.code)


def _around(text, m, before=45, after=45):
    return text[max(0, m.start() - before):m.end() + after]


def raw_roles(parts: dict, code_roles_allowed: bool = False) -> list[str]:
    """Every role or glue reference shown as text: in the prose, or, unless
    ``code_roles_allowed`` (a page that documents the roles), as a bare role in inline code."""
    out = [_around(parts["prose"], m) for m in ROLE_RE.finditer(parts["prose"])]
    if not code_roles_allowed:
        out += [f"code element {c!r}" for c in parts["code"] if BARE_ROLE_CODE.match(c.strip())]
    return out


def bad_verdict_grammar(parts: dict) -> list[str]:
    """Every place in the prose where a decision word follows a verb ("is fails")."""
    return [_around(parts["prose"], m, 50, 30) for rx in GRAMMAR_RES
            for m in rx.finditer(parts["prose"])]


def smart_dashes(parts: dict) -> list[str]:
    """Every option in the prose whose hyphens became an en or em dash ("–model")."""
    return [_around(parts["prose"], m, 40, 10) for m in DASH_OPTION.finditer(parts["prose"])]


def posbias_commands(parts: dict) -> list[str]:
    """The ``posbias`` commands of a page: each line of a code block that starts with the
    command (continuation lines joined, comments dropped), and each inline code element that
    holds a whole command (one with ``--out``).  Synopsis lines (``[...]``, ``A|B``) and
    ellipses are not commands."""
    lines = []
    for block in parts["pre"]:
        lines += re.sub(r"\\\n\s*", " ", block).splitlines()
    lines += [c for c in parts["code"] if " --out" in c]
    out = []
    for line in lines:
        line = " ".join(line.split(" #")[0].split())
        if COMMAND_LINE.match(line) and not re.search(r"\[|\||\.\.\.|\u2026", line):
            out.append(re.sub(r"^(?:\$\s*)?(?:\S*/)?posbias", "posbias", line))
    return out


def _number(text: str) -> float:
    return float(text.replace("\u2212", "-").replace(",", ""))


def intervals_missing_estimate(parts: dict) -> list[str]:
    """Every ``estimate [low, high]`` in the prose whose estimate is not inside ``[low,
    high]`` (a bound printed above the estimate's, or below it), or whose bounds are reversed:
    rounding is monotone, so an interval that contains its estimate still does when printed."""
    out = []
    for m in INTERVAL.finditer(parts["prose"]):
        e, lo, hi = (_number(g) for g in m.groups())
        if not lo <= e <= hi:
            out.append(_around(parts["prose"], m, 40, 5))
    return out


#: What a bare Python repr looks like: text that opens a container, or a NumPy scalar or array
#: repr, a dict with string keys, a printed boolean or a tuple of booleans anywhere in it.
REPR_START = ("{", "[", "(")
REPR_MARKS = ("np.float64(", "np.int64(", "array(", "Matrix(", "{'", ": True", ": False",
              "(True", "(False")
#: A dict literal with a key that is not a JSON string (``{1: 1.0``, ``{0.1: 'a'``), or an
#: output that is one bare number (``2.4288586266815387e-15``).
REPR_DICT = re.compile(r"\{[^{}\s\"]+: ")
REPR_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?(nan|inf)")


class _Outputs(HTMLParser):
    """The text of every cell output of mime ``text/plain`` and every stream output, as
    myst-nb renders them (``<div class="output text_plain ...">``, ``<div class="output
    stream ...">``)."""

    KINDS = {"text_plain", "stream"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.outputs, self._depth, self._buf = [], 0, None

    def handle_starttag(self, tag, attrs):
        if tag != "div":
            return
        if self._buf is not None:
            self._depth += 1
            return
        cls = set((dict(attrs).get("class") or "").split())
        if "output" in cls and cls & self.KINDS:
            self._buf, self._depth = [], 1

    def handle_endtag(self, tag):
        if tag != "div" or self._buf is None:
            return
        self._depth -= 1
        if self._depth == 0:
            self.outputs.append("".join(self._buf))
            self._buf = None

    def handle_data(self, data):
        if self._buf is not None:
            self._buf.append(data)


def looks_like_repr(text: str) -> bool:
    """Whether an output's text reads as a bare Python repr: it starts with ``{``, ``[`` or
    ``(``, or holds a NumPy repr (``np.float64(``, ``array(``), a dict with string keys
    (``{'``, ``{1: ``) or a printed boolean (``: True``, ``(True``), or is one bare number.  A
    printed prompt (its JSON has double-quoted keys) or a sentence does not.

    >>> looks_like_repr("{'a': 1}"), looks_like_repr("B by w: {1: 1.0}"), looks_like_repr("0.5")
    (True, True, True)
    >>> looks_like_repr('JSON data:\\n{"1bdc": "2f13"}'), looks_like_repr("The floor is 0.5.")
    (False, False)
    """
    t = text.strip()
    return (t.startswith(REPR_START) or any(m in t for m in REPR_MARKS)
            or bool(REPR_DICT.search(t)) or bool(REPR_NUMBER.fullmatch(t)))


def bare_reprs(html: str) -> list[str]:
    """A short excerpt (whitespace collapsed, at most 80 characters) of every ``text/plain``
    or stream cell output of a built page that :func:`looks_like_repr`: a value the reader
    should see as a table, as math or in a sentence."""
    p = _Outputs()
    p.feed(html)
    return [re.sub(r"\s+", " ", t.strip())[:80] for t in p.outputs if looks_like_repr(t)]


#: The patterns of :func:`hand_formatted`, each with what it finds.
HAND_FORMATTED = {
    "a unit inside and after an interval": re.compile(
        r"\d%?\s*\[\s*[\d.]+,\s*[\d.]+\s*\]\s*%"),
    "a signed zero": re.compile(r"(?<![\w.,])[+\-\u2212]0(?:\.0+)?(?![\d.])"),
    "a one-sided bound with two ends": re.compile(
        r"one-sided[^.;\[\]]{0,40}\bbounds?\s*\["),
    "a float in full": re.compile(r"(?<![\w.])\d+\.\d{8,}"),
}


def hand_formatted(parts: dict) -> list[str]:
    """Every number in the prose (code left out: a doctest prints what Python prints) that the
    book's formatter would have printed otherwise (:data:`HAND_FORMATTED`)."""
    return [f"{what}: {_around(parts['prose'], m, 40, 10)!r}"
            for what, rx in HAND_FORMATTED.items() for m in rx.finditer(parts["prose"])]


#: An emphasis that opens right after a digit: Markdown's reading of ``5*sliding``.
BROKEN_EMPHASIS = re.compile(r"\d<em>")


def broken_emphasis(html: str) -> list[str]:
    """Every italic that opens right after a digit in a page's HTML (``5<em>sliding:512,full,
    5</em>``): an asterisk of a layout string read as Markdown emphasis."""
    return [html[max(0, m.start() - 30):m.end() + 30] for m in BROKEN_EMPHASIS.finditer(html)]


FIGCAPTION = re.compile(r"<figcaption[^>]*>(.*?)</figcaption>", re.S)
WHAT_TO_SEE = re.compile(r"\bwhat to see:", re.I)


def captions_without_what_to_see(html: str) -> list[str]:
    """The start of every figure caption of a page that has no "What to see:" sentence."""
    out = []
    for m in FIGCAPTION.finditer(html):
        text = " ".join(re.sub(r"<[^>]+>", " ", m.group(1)).split())
        if not WHAT_TO_SEE.search(text):
            out.append(text[:70])
    return out
