"""The code a namespace reaches: top-level statements of the package, and the names that tie them.

:func:`posbias_nb.provenance.code.code_digest` hashes what computes a namespace.  Hashing whole
modules ties a measurement to every sentence of every module it imports, and to the module's name:
moving a function to another module, or editing a page helper that sits beside a measurement,
moved the digest of every namespace that imported that module, and each move cost hours of
re-measurement before the stamps vouched again.  This module finds, instead, the **units** that
run: the top-level statements of the package's modules (a function, a class, an assignment, an
``if``), and between them the **edges**, one per name a unit reads, to what that name is bound to
when the module runs.

Reached, starting from the namespace's root modules (all of their units):

- each unit that a name read by a reached unit is bound to (through ``from x import y``, ``import
  x as m`` with ``m.y``, re-exports and star imports, followed to the statement that binds it);
  a package module used other than as ``m.attr`` (passed on, ``getattr(m, ...)``) reaches all of
  its units;
- each module that runs: the module of a reached unit, the modules it imports at its top level or
  inside a reached unit, and the ``__init__`` of every package on the way; and in every module that
  runs, each unit that may act when it runs -- conservatively, such a unit counts although no
  read name leads to it.  A unit is taken to act unless it is a definition or an assignment to
  names whose import-time calls are each to a library, a builtin or a module that computes
  nothing, given none of the package's objects (a builtin that only reads, ``tuple`` or
  ``len`` called by name, and a read-only method, ``SETTINGS.items()``, may be), and never
  ``setattr``, ``exec`` and the like: so ``register(...)``, ``X.update(...)``,
  ``np.copyto(A, ...)``, a decorator of the package's own, an ``if`` and a ``for`` act.

A constant that is plain data (:meth:`Index.folded`, rule ``reach-v2``) is a unit by its
**value**, whatever expression computes it from literals and other such constants; the
constants it reads are not reached through it (their modules still run).  So a list of names
derived from one table is the same unit as the literal it replaced, and an edit of that table
moves only what reads a value that moved.

What any other unit is: its ``ast`` dump, docstrings removed (the rule of
:func:`posbias_nb.provenance.code.normalised_source`), with every read of a name bound in the
package (``scaled``, ``helpers.scaled``, ``fix.QUICK``) written ``ref#0``, ``ref#1``, ... in the
order it is met and the package's import statements inside it dropped.  What an edge is: the
unit, the read (``ref#k``, or a library's name as written), and the content of what it resolves
to (the binding statement's hash, ``ext:numpy.linalg`` for a library, ``where:<module>`` for
``__file__`` and ``__name__``, which do depend on where the code lives); an alias (``Codec =
_Codec``) resolves to the statement it names, and is not code of its own.  So the digest is the same when a unit moves to
another module and its readers import it from there (by name or as ``module.name``), when a
module is renamed, and when a unit that no namespace reaches changes; it moves when any reached
unit's text changes (a local variable keeps its name), and when a name comes to mean another
statement of the same text only elsewhere (each read's edge names the content it means).

A top-level function is a unit by its code, not its name (rule ``reach-v3``): every read of it
is already an edge to its code, so a function renamed together with its readers is the same code
and moves no digest.  Its parameters, a class's name (data: ``type(x).__name__``, a
dataclass's ``repr``) and a constant bound by text still count by name; and where the package's
computing code reads a function's name (``f.__name__``, ``f.__qualname__``, ``f.__code__``:
:attr:`Index.reflects`), or looks a function up by a string in a table of names (``globals()[s]``,
``vars(m).get(s)``), every function's name counts again; a module reached whole (handed to
``getattr``, passed on) counts each of its units with the names it binds.

Not seen, as before this module (the module-level digest followed import statements only): code
reached by a string alone (``importlib.import_module(f"...")``, a registry filled by a module that
nothing imports).  The package's ``__init__`` resolves its front door that way and is not
computing code.
"""
from __future__ import annotations

import ast
import builtins
import copy
import hashlib
from dataclasses import dataclass, field
from typing import Mapping

__all__ = ["Index", "index", "plain", "strip_docstrings"]

#: Names whose value depends on the module the code sits in: an edge to them names the module.
_WHERE = frozenset({"__file__", "__name__", "__spec__", "__package__", "__path__"})


@dataclass
class _Unit:
    mod: str
    node: ast.stmt
    binds: set[str] = field(default_factory=set)
    pure: bool = True
    dump: str = ""      # the canonical dump (:meth:`Index._canon`), set when first needed
    hash: str = ""


@dataclass
class _Module:
    name: str
    is_pkg: bool
    units: list[_Unit]
    bindings: dict[str, list[int]]          # name -> indices of the units that bind it
    imported: dict[str, tuple]               # name -> what an import at top level binds it to
    stars: list[str]                         # modules star-imported
    top_imports: set[str]                    # package modules imported at top level


def strip_docstrings(tree: ast.AST) -> None:
    """Remove the docstring of the module and of every class and function in ``tree`` (a body
    left empty becomes ``pass``): the one rule by which a docstring is not code."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]


#: Attributes through which code can read what a function is called (its name as data).
_OWN_NAME = frozenset({"__name__", "__qualname__", "__code__"})


def _reads_a_name(n: ast.AST) -> bool:
    """Whether ``n`` reads what a function is called: its own name (``f.__name__``; a type's
    name read as ``type(x).__name__``, an error message's, excepted) or a function looked up by a
    string in a namespace's table (``globals()[s]``, ``vars(m).get(s)``).  (A package module
    handed to ``getattr`` is reached whole, and there names count, :meth:`Index._content`.)"""
    if isinstance(n, ast.Attribute) and n.attr in _OWN_NAME:
        v = n.value
        return not (isinstance(v, ast.Call) and isinstance(v.func, ast.Name)
                    and v.func.id == "type")
    table = None
    if isinstance(n, ast.Subscript):
        table = n.value
    elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
            and n.func.attr in ("get", "__getitem__"):
        table = n.func.value
    return isinstance(table, ast.Call) and isinstance(table.func, ast.Name) \
        and table.func.id in ("globals", "vars", "locals")


def _bound_names(stmt: ast.stmt) -> set[str]:
    """The names a top-level statement binds at module scope (not inside nested functions or
    classes it defines, which are scopes of their own)."""
    out: set[str] = set()
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    stack: list[ast.AST] = [stmt]
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
            continue
        if isinstance(n, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.add(n.id)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            for a in n.names:
                if a.name != "*":
                    out.add(a.asname or a.name.split(".")[0])
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            out.update(n.names)
        stack.extend(ast.iter_child_nodes(n))
    return out


def _import_time_nodes(stmt: ast.stmt):
    """The nodes of a top-level statement that run when the module runs: everything but the
    bodies of the functions it defines (their decorators, defaults and annotations do run)."""
    stack: list[ast.AST] = [stmt]
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            stack.extend(n.decorator_list)
            stack.extend(d for d in n.args.defaults + n.args.kw_defaults if d is not None)
            continue
        if isinstance(n, ast.Lambda):
            continue
        stack.extend(ast.iter_child_nodes(n))


#: Methods that read and do not change the object they are called on (``SETTINGS.items()``): an
#: import-time call of one on a name of the package leaves the unit pure.
_READ_ONLY = frozenset({"items", "keys", "values", "get", "copy", "format", "join", "split",
                        "startswith", "endswith", "lower", "upper", "replace", "strip", "index",
                        "count", "__getitem__"})


#: Builtins that change other objects or run code: a call of one at import acts.
_ACTING_BUILTINS = frozenset({"setattr", "delattr", "exec", "eval", "globals", "vars", "locals",
                              "__import__", "compile", "open", "print", "input", "breakpoint"})


#: Builtins that read their arguments and change none of them.
_READING_BUILTINS = frozenset({
    "tuple", "list", "dict", "set", "frozenset", "len", "sorted", "min", "max", "sum", "any",
    "all", "range", "enumerate", "zip", "map", "filter", "str", "int", "float", "bool", "repr",
    "isinstance", "issubclass", "round", "abs", "reversed", "iter", "hash", "type", "format"})


#: What a constant computed by value (:meth:`Index.folded`) may call: builtins that build or read
#: plain data, and read-only methods.
_FOLD_BUILTINS = frozenset({"tuple", "list", "dict", "set", "frozenset", "len", "sorted", "min",
                            "max", "sum", "any", "all", "range", "enumerate", "zip", "reversed",
                            "str", "int", "float", "bool", "abs", "round"})
_FOLD_METHODS = _READ_ONLY - {"__getitem__"}


class _FoldFrozen(frozenset):
    """A set while a constant is computed by value: it may be built, combined, asked for a
    member or its size, but not iterated (its order would depend on the hash seed)."""

    def __iter__(self):
        raise TypeError("iterating a set: its order depends on the hash seed")

    def _members(self):
        return frozenset.__iter__(self)

    def copy(self):
        return type(self)(self._members())

    def __deepcopy__(self, memo):
        return type(self)(self._members())

    def __or__(self, other):
        return type(self)(frozenset.__or__(self, other))

    def __and__(self, other):
        return type(self)(frozenset.__and__(self, other))

    def __sub__(self, other):
        return type(self)(frozenset.__sub__(self, other))

    def __xor__(self, other):
        return type(self)(frozenset.__xor__(self, other))

    __ror__, __rand__, __rxor__ = __or__, __and__, __xor__

    def __rsub__(self, other):
        return type(self)(frozenset.__rsub__(self, other))


class _FoldSet(_FoldFrozen):
    """A ``set`` (mutable at run time) while a constant is computed by value."""


_FOLD_SCOPE = {n: getattr(builtins, n) for n in _FOLD_BUILTINS - {"set", "frozenset"}}
_FOLD_SCOPE.update(set=_FoldSet, frozenset=_FoldFrozen)


def plain(v) -> str:
    """The canonical text of plain data, its types named: a set's members sorted by their text,
    a dict's items in their order (it is the order the code iterates).  Raises TypeError for
    anything else."""
    if v is None or isinstance(v, bool):
        return repr(v)
    if type(v) in (int, float, complex, str, bytes):
        return f"{type(v).__name__}:{v!r}"
    if isinstance(v, (set, frozenset)):
        tag = "set" if isinstance(v, (set, _FoldSet)) else "frozenset"
        members = frozenset.__iter__(v) if isinstance(v, frozenset) else iter(v)
        return tag + "{" + ",".join(sorted(plain(x) for x in members)) + "}"
    if type(v) in (tuple, list):
        return type(v).__name__ + "[" + ",".join(plain(x) for x in v) + "]"
    if type(v) is dict:
        return "dict{" + ",".join(f"{plain(k)}:{plain(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"not plain data: {type(v).__name__}")


def _freeze(v):
    """``v`` with every set a :class:`_FoldFrozen` (or :class:`_FoldSet`), as a constant that
    another constant reads is given to it."""
    if isinstance(v, _FoldFrozen):
        return v
    if isinstance(v, set):
        return _FoldSet(_freeze(x) for x in v)
    if isinstance(v, frozenset):
        return _FoldFrozen(_freeze(x) for x in v)
    if type(v) in (tuple, list):
        return type(v)(_freeze(x) for x in v)
    if type(v) is dict:
        return {_freeze(k): _freeze(x) for k, x in v.items()}
    return v


def _thaw(v):
    return copy.deepcopy(v)


def _names_only_all(stmt: ast.stmt) -> bool:
    """``__all__.append("x")``, ``__all__.extend([...])`` or ``__all__ += [...]`` of constants."""
    if isinstance(stmt, ast.AugAssign):
        target, values = stmt.target, [stmt.value]
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) \
            and isinstance(stmt.value.func, ast.Attribute) \
            and stmt.value.func.attr in ("append", "extend"):
        target, values = stmt.value.func.value, stmt.value.args
    else:
        return False
    return isinstance(target, ast.Name) and target.id == "__all__" and all(
        isinstance(n, (ast.Constant, ast.List, ast.Tuple, ast.Load))
        for v in values for n in ast.walk(v))


def _root_name(expr: ast.AST) -> str | None:
    while isinstance(expr, (ast.Attribute, ast.Subscript, ast.Call)):
        expr = expr.func if isinstance(expr, ast.Call) else expr.value
    return expr.id if isinstance(expr, ast.Name) else None


class Index:
    """The units and bindings of a package's modules (``{dotted module: source}``), and what a
    namespace's root modules reach in them (:meth:`reach`)."""

    def __init__(self, srcs: Mapping[str, str], not_computing: frozenset[str] = frozenset(),
                 fold: bool = True, names: bool = False):
        self.srcs = dict(srcs)
        self.known = set(self.srcs)
        self.not_computing = not_computing
        self.fold = fold
        #: whether the name a top-level function binds counts in its unit (rules before
        #: ``reach-v3``, and wherever the package's code reads a function's name, :attr:`reflects`)
        self.names = names
        #: ``(module, line)`` of each read of a function's own name (``f.__name__``,
        #: ``f.__qualname__``, ``f.__code__``) in the package's computing code: where there is
        #: one, a function's name may be data, so every function's name counts
        self.reflects: list[tuple[str, int]] = []
        self.mods: dict[str, _Module] = {}
        self._memo_reads: dict[tuple[str, int], list] = {}
        self._memo_reach: dict[tuple[str, ...], tuple] = {}
        self._memo_fold: dict[tuple[str, int], tuple | None] = {}
        self._folding: set[tuple[str, int]] = set()
        self._memo_value: dict[tuple[str, int], object] = {}
        self.read_by_value: dict[tuple[str, ...], set[tuple[str, int]]] = {}
        for m in sorted(self.known):
            if m in not_computing:
                continue
            self.mods[m] = self._module(m, self.srcs[m])
        if not self.names and self.reflects:
            self.names = True
        for m in self.mods.values():  # every module known: what a call resolves to can be told
            for u in m.units:
                u.pure = self._is_pure(m, u)

    # ---- imports -------------------------------------------------------------------------
    def _is_pkg(self, mod: str) -> bool:
        return mod == "" or any(k.startswith(mod + ".") for k in self.known)

    def _base(self, mod: str, node: ast.ImportFrom) -> list[str] | None:
        """The package path a ``from ... import`` reads from, or None for a library."""
        if node.level:
            parts = mod.split(".") if mod else []
            here = parts if self._is_pkg(mod) else parts[:-1]
            base = here[:len(here) - (node.level - 1)] if node.level > 1 else here
            return base + (node.module.split(".") if node.module else [])
        if node.module and (node.module == "posbias_nb" or node.module.startswith("posbias_nb.")):
            return node.module.split(".")[1:]
        return None

    def _targets(self, mod: str, node: ast.Import | ast.ImportFrom) -> dict[str, tuple]:
        """``{bound name: target}`` of an import statement; a target is ``("mod", m)``, ``("attr",
        m, name)`` or ``("ext", dotted)``."""
        out: dict[str, tuple] = {}
        if isinstance(node, ast.ImportFrom):
            base = self._base(mod, node)
            for a in node.names:
                if a.name == "*":
                    continue
                bound = a.asname or a.name
                if base is None:
                    out[bound] = ("ext", f"{'.' * node.level}{node.module}.{a.name}")
                    continue
                dotted = ".".join(base + [a.name])
                out[bound] = ("mod", dotted) if dotted in self.known else \
                    ("attr", ".".join(base), a.name)
        else:
            for a in node.names:
                if a.name == "posbias_nb" or a.name.startswith("posbias_nb."):
                    inner = ".".join(a.name.split(".")[1:])
                    if a.asname:
                        out[a.asname] = ("mod", inner)
                    else:  # ``import posbias_nb.x.y`` binds ``posbias_nb``, the package
                        out["posbias_nb"] = ("mod", "")
                else:
                    out[a.asname or a.name.split(".")[0]] = (
                        "ext", a.name if a.asname else a.name.split(".")[0])
        return out

    def _stars(self, mod: str, node: ast.ImportFrom) -> list[str]:
        base = self._base(mod, node)
        if base is None or not any(a.name == "*" for a in node.names):
            return []
        return [".".join(base)]

    def _imported_modules(self, mod: str, nodes) -> set[str]:
        """The package modules that import statements among ``nodes`` make run (with ``from m
        import name``, ``m`` itself)."""
        out = set()
        for n in nodes:
            if isinstance(n, (ast.Import, ast.ImportFrom)):
                for t in self._targets(mod, n).values():
                    if t[0] == "mod":
                        out.add(t[1])
                    elif t[0] == "attr":
                        out.add(t[1])
                out.update(self._stars(mod, n) if isinstance(n, ast.ImportFrom) else [])
        return {m for m in out if m in self.known}

    # ---- modules -------------------------------------------------------------------------
    def _module(self, name: str, src: str) -> _Module:
        tree = ast.parse(src)
        strip_docstrings(tree)
        self.reflects += [(name, n.lineno) for n in ast.walk(tree) if _reads_a_name(n)]
        body = tree.body
        units: list[_Unit] = []
        bindings: dict[str, list[int]] = {}
        imported: dict[str, tuple] = {}
        stars: list[str] = []
        top: set[str] = set()
        for stmt in body:
            if isinstance(stmt, ast.Pass) and len(body) == 1:
                continue
            if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
                continue
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                t = self._targets(name, stmt)
                internal = {k: v for k, v in t.items() if v[0] != "ext"}
                imported.update(internal)
                if isinstance(stmt, ast.ImportFrom):
                    stars += self._stars(name, stmt)
                top |= self._imported_modules(name, [stmt])
                # a library import is content (which library a name means); a package import
                # is an edge, resolved where it is read
                ext = {k: v for k, v in t.items() if v[0] == "ext"}
                if not ext:
                    continue
                for k, v in ext.items():
                    imported[k] = v
                continue
            if _names_only_all(stmt) or (
                    isinstance(stmt, (ast.Assign, ast.AnnAssign))
                    and {t.id for t in (stmt.targets if isinstance(stmt, ast.Assign)
                                        else [stmt.target]) if isinstance(t, ast.Name)}
                    == {"__all__"}):
                continue  # __all__ names what a star import takes; it computes nothing
            u = _Unit(name, stmt, _bound_names(stmt))
            for n in _import_time_nodes(stmt):
                if isinstance(n, (ast.Import, ast.ImportFrom)):
                    top |= self._imported_modules(name, [n])
            idx = len(units)
            units.append(u)
            for b in u.binds:
                bindings.setdefault(b, []).append(idx)
        return _Module(name, self._is_pkg(name), units, bindings, imported, stars, top)

    def _is_pure(self, m: _Module, u: _Unit) -> bool:
        """Whether running the unit can do nothing but bind its names: a definition or an
        assignment whose import-time calls are all to libraries or builtins."""
        if not isinstance(u.node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                   ast.Assign, ast.AnnAssign)):
            return False
        if isinstance(u.node, ast.Assign) and not all(
                isinstance(t, ast.Name) or (isinstance(t, (ast.Tuple, ast.List))
                                            and all(isinstance(e, ast.Name) for e in t.elts))
                for t in u.node.targets):
            return False  # X[k] = ..., X.attr = ...: it changes another binding
        if isinstance(u.node, ast.AnnAssign) and not isinstance(u.node.target, ast.Name):
            return False
        for n in _import_time_nodes(u.node):
            if isinstance(n, ast.ClassDef) and n is not u.node:
                return False
            if isinstance(n, ast.Call) or (isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                          ast.ClassDef)) and n.decorator_list):
                funcs = [n.func] if isinstance(n, ast.Call) else n.decorator_list
                for f in funcs:
                    if isinstance(n, ast.Call) and isinstance(f, ast.Attribute) \
                            and f.attr in _READ_ONLY:
                        continue  # the object is read; what it is counts where it is read
                    r = _root_name(f)
                    if r is None or r in _ACTING_BUILTINS:
                        return False
                    t = self._name_target(m, r)
                    # a library, a builtin, or a module that computes nothing (NOT_COMPUTING:
                    # a design's frozen object, a page's helper)
                    if t[0] not in ("ext", "builtin", "opaque"):
                        return False
                    # ... given none of the package's objects, which it could change
                    # (np.copyto(A, ...), dict.update(D, ...)): reading one makes it act
                    if isinstance(n, ast.Call) and t[0] != "opaque" and not (
                            isinstance(f, ast.Name) and t[0] == "builtin"
                            and t[1] in _READING_BUILTINS) and any(
                            self._name_target(m, a.id)[0] in ("units", "mod", "whole")
                            for arg in [*n.args, *(k.value for k in n.keywords)]
                            for a in ast.walk(arg) if isinstance(a, ast.Name)
                            and isinstance(a.ctx, ast.Load)):
                        return False
        return True

    # ---- resolution ----------------------------------------------------------------------
    def _name_target(self, m: _Module, name: str, depth: int = 0) -> tuple:
        """What ``name`` at the top level of module ``m`` is bound to: ``("units", mod, [idx])``,
        ``("mod", mod)``, ``("ext", dotted)``, ``("builtin", name)``, ``("where", mod)`` or
        ``("opaque", mod.name)`` (a module that computes nothing)."""
        if depth > 50:
            raise ValueError(f"import cycle resolving {name!r} in {m.name!r}")
        if name in _WHERE:
            return ("where", m.name)
        if name in m.bindings:
            idx = m.bindings[name]
            node = m.units[idx[0]].node if len(idx) == 1 else None
            # an alias (``Codec = _Codec``) is the statement it names: the same object
            if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name) \
                    and isinstance(node.value, ast.Name) and node.value.id != name:
                t = self._name_target(m, node.value.id, depth + 1)
                if t[0] == "units":
                    return t
            return ("units", m.name, tuple(idx))
        if name in m.imported:
            return self._follow(m.imported[name], depth + 1)
        for s in m.stars:
            if s in self.mods:
                t = self._name_target(self.mods[s], name, depth + 1)
                if t[0] != "builtin":
                    return t
            elif s in self.known:
                return ("opaque", f"{s}.{name}")
        return ("builtin", name)

    def _follow(self, target: tuple, depth: int = 0) -> tuple:
        if target[0] == "ext":
            return target
        if target[0] == "mod":
            return ("opaque", target[1]) if target[1] in self.not_computing else target
        _, mod, name = target
        if mod in self.not_computing:
            return ("opaque", f"{mod}.{name}")
        if mod not in self.mods:
            return ("missing", f"{mod}.{name}")
        return self._name_target(self.mods[mod], name, depth)

    def _attr_target(self, mod: str, attr: str) -> tuple:
        """``m.attr`` where ``m`` is package module ``mod``."""
        sub = f"{mod}.{attr}" if mod else attr
        if mod in self.mods:
            t = self._name_target(self.mods[mod], attr)
            if t[0] != "builtin":
                return t
        if sub in self.known:
            return ("opaque", sub) if sub in self.not_computing else ("mod", sub)
        return ("missing", f"{mod}.{attr}")

    def _canon(self, key: tuple[str, int]) -> list[tuple[str, tuple]]:
        """Set the unit's canonical dump and hash, and return ``(label, target)`` for every
        name it reads.

        Every read of a name bound in the package (``scaled``, ``helpers.scaled``,
        ``fix.QUICK``: a name, or a module's attribute chain) becomes ``ref#0``, ``ref#1``, ...
        in the order it is met, and the import statements of the package inside
        the unit become
        ``pass``: so the dump is that of the code, not of where what it reads lives; the edges
        ``(ref<k>, target)`` say what each read means.  A library's name, a builtin and a local
        variable stay as written."""
        if key in self._memo_reads:
            return self._memo_reads[key]
        m = self.mods[key[0]]
        u = m.units[key[1]]
        node = copy.deepcopy(u.node)
        local: dict[str, list[tuple]] = {}
        package_imports: set[int] = set()
        for n in ast.walk(node):
            if isinstance(n, (ast.Import, ast.ImportFrom)):
                ts = self._targets(m.name, n)
                if all(t[0] != "ext" for t in ts.values()) and not (
                        isinstance(n, ast.ImportFrom) and self._base(m.name, n) is None):
                    package_imports.add(id(n))
                for k, v in ts.items():
                    local.setdefault(k, []).append(self._follow(v) if v[0] != "ext" else v)
        parents: dict[int, ast.AST] = {}
        for p in ast.walk(node):
            for c in ast.iter_child_nodes(p):
                parents[id(c)] = p
        refs: dict[int, list[tuple]] = {}   # id of the node read -> its targets
        for n in ast.walk(node):
            if not (isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)):
                continue
            # a name imported inside the unit may also be the module's own (scopes are not told
            # apart): both count
            got, top = [], n
            own = self._name_target(m, n.id)
            cands = local.get(n.id, []) + ([own] if own[0] != "builtin" or n.id not in local
                                           else [])
            for t in cands:
                cur = n
                while t[0] == "mod":
                    p = parents.get(id(cur))
                    if isinstance(p, ast.Attribute) and p.value is cur:
                        t = self._attr_target(t[1], p.attr)
                        cur = p
                    else:
                        t = ("whole", t[1])  # the module itself is passed on: all of it counts
                        break
                if cur is not n and top is n:
                    top = cur
                got.append(t)
            if any(t[0] not in ("ext", "builtin", "where") for t in got):
                refs[id(top if top is not n else n)] = got
        out: list[tuple[str, tuple]] = []
        count = [0]

        def canon(x):
            if id(x) in refs:
                label = f"ref#{count[0]}"  # '#': no name in a source can clash
                count[0] += 1
                out.extend((label, t) for t in refs[id(x)])
                return ast.Name(id=label, ctx=ast.Load())
            for name, value in ast.iter_fields(x):
                if isinstance(value, list):
                    # an import of the package inside the unit is dropped (what it binds is read
                    # as ref#k): where the code it names lives does not count
                    kept = [canon(v) if isinstance(v, ast.AST) else v for v in value
                            if id(v) not in package_imports]
                    if value and not kept and name in ("body", "orelse", "finalbody"):
                        kept = [ast.Pass()]
                    setattr(x, name, kept)
                elif isinstance(value, ast.AST):
                    setattr(x, name, canon(value))
            return x

        node = canon(node)
        if not self.names and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # reach-v3: a top-level function is its code, not its name; every read of it is an
            # edge to that code (ref#k), so a function renamed with its readers is the same code
            node.name = "def#"
        u.dump = ast.dump(node, annotate_fields=True, include_attributes=False)
        u.hash = hashlib.sha256(u.dump.encode()).hexdigest()[:32]
        # reads not canonicalised keep their names; what a library's name or __file__ means is
        # an edge too (``import numpy as np`` or ``import numpy.ma as np``)
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) \
                    and not n.id.startswith("ref#"):
                for t in local.get(n.id, []) + [self._name_target(m, n.id)]:
                    if t[0] in ("where", "ext"):
                        out.append((n.id, t))
        # what an import inside the unit binds counts even where no read of it is seen (an
        # ``if``/``try`` choosing between implementations binds the name for other units)
        # (a module so imported runs, :meth:`reach`; what of it counts is what is read of it)
        read = {n.id for n in ast.walk(u.node) if isinstance(n, ast.Name)
                and isinstance(n.ctx, ast.Load)}
        for k, ts in local.items():
            if k not in read:
                out += [(f"import {k}", t) for t in ts if t[0] != "mod"]
        self._memo_reads[key] = out
        return out

    def _alias_of(self, m: _Module, u: _Unit) -> tuple | None:
        """What an alias statement (``X = Y``, ``Y`` a statement of the package) names, or
        None: such a statement is not code of its own; its target counts where it is reached."""
        node = u.node
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Name) \
                and node.value.id != node.targets[0].id:
            t = self._name_target(m, node.value.id)
            if t[0] == "units":
                return t
        return None

    def _hash(self, mod: str, j: int) -> str:
        u = self.mods[mod].units[j]
        if not u.hash and self.folded((mod, j)) is None:
            self._canon((mod, j))
        return u.hash

    # ---- constants by value --------------------------------------------------------------
    def folded(self, key: tuple[str, int]) -> tuple[str, frozenset, frozenset] | None:
        """``(canonical value, units read, modules read)`` of a unit that binds one name to
        plain data computed from literals and other such constants of the package (a tuple, a
        dict of sets, ``NETWORK + PROMPT``, ``{r: ... for r in TABLE if ...}``), or None.

        Such a unit is hashed by the value it binds (:func:`plain`), not by its text or name, and reaching it does not reach the constants it was computed from: two ways of
        writing one value are one unit, and an edit of a table moves only the namespaces that
        read a value that moved.  The modules it reads still run (what acts in them counts).
        A statement that changes the constant at import (``A.append(...)``, ``Design(..., A)``)
        acts, so it counts by its text wherever the constant's module runs: the digest moves
        with it, though the value hashed is the one bound before it.

        Refused (None): more than one statement binding the name, a call but of a reading
        builtin or a read-only method, a library's or ``__file__``'s name, a module's name used
        whole, a lambda, a value that is not plain data, an error while computing it, and an
        iteration over a set (its order depends on the hash seed)."""
        if not self.fold:
            return None
        if key in self._memo_fold:
            return self._memo_fold[key]
        if key in self._folding:
            return None  # a cycle: not a constant
        self._folding.add(key)
        try:
            got = self._fold(key)
        finally:
            self._folding.discard(key)
        self._memo_fold[key] = got
        if got is not None:
            u = self.mods[key[0]].units[key[1]]
            u.dump = got[0]
            u.hash = hashlib.sha256(got[0].encode()).hexdigest()[:32]
        return got

    def _fold(self, key: tuple[str, int]) -> tuple[str, frozenset, frozenset] | None:
        m = self.mods[key[0]]
        u = m.units[key[1]]
        node = u.node
        if not u.pure:
            return None
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            name, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                and node.value is not None:
            name, value = node.target.id, node.value
        else:
            return None
        if m.bindings.get(name) != [key[1]]:
            return None
        expr = copy.deepcopy(value)
        local = {n.id for c in ast.walk(expr) if isinstance(c, ast.comprehension)
                 for n in ast.walk(c.target) if isinstance(n, ast.Name)}
        parents: dict[int, ast.AST] = {}
        for p in ast.walk(expr):
            for c in ast.iter_child_nodes(p):
                parents[id(c)] = p
        env: dict[str, object] = {}
        subs: dict[int, str] = {}
        read_units: set[tuple[str, int]] = set()
        read_mods: set[str] = set()
        for n in ast.walk(expr):
            if isinstance(n, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)):
                return None
            if isinstance(n, ast.Call):
                f = n.func
                if isinstance(f, ast.Attribute):
                    if f.attr not in _FOLD_METHODS:
                        return None
                elif not (isinstance(f, ast.Name) and f.id in _FOLD_BUILTINS):
                    return None
            if not (isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)):
                continue
            t = self._name_target(m, n.id)
            if n.id in local:
                if t[0] != "builtin":
                    return None  # a comprehension's name that is also the package's: unclear
                continue
            cur = n
            while t[0] == "mod":
                p = parents.get(id(cur))
                if not (isinstance(p, ast.Attribute) and p.value is cur):
                    return None  # the module itself, passed on
                read_mods.add(t[1])
                t = self._attr_target(t[1], p.attr)
                cur = p
            if t[0] == "builtin":
                if t[1] not in _FOLD_BUILTINS:
                    return None
                continue
            if t[0] != "units" or len(t[2]) != 1:
                return None
            got = self.folded((t[1], t[2][0]))
            if got is None:
                return None
            label = f"__fold{len(env)}"
            env[label] = (t[1], t[2][0])
            subs[id(cur)] = label
            read_units |= {(t[1], t[2][0])} | got[1]
            read_mods |= {t[1]} | got[2]

        class Sub(ast.NodeTransformer):
            def visit(self, x):
                if id(x) in subs:
                    return ast.copy_location(ast.Name(id=subs[id(x)], ctx=ast.Load()), x)
                x = self.generic_visit(x)
                if isinstance(x, ast.Set):  # a set literal: one that refuses iteration
                    return ast.copy_location(ast.Call(
                        func=ast.Name(id="set", ctx=ast.Load()),
                        args=[ast.List(elts=x.elts, ctx=ast.Load())], keywords=[]), x)
                if isinstance(x, ast.SetComp):
                    return ast.copy_location(ast.Call(
                        func=ast.Name(id="set", ctx=ast.Load()),
                        args=[ast.GeneratorExp(elt=x.elt, generators=x.generators)],
                        keywords=[]), x)
                return x

        body = ast.fix_missing_locations(ast.Expression(body=Sub().visit(expr)))
        scope = {"__builtins__": _FOLD_SCOPE}
        for label, k in env.items():
            scope[label] = _thaw(self._memo_value[k])
        try:
            v = eval(compile(body, "<fold>", "eval"), scope)  # noqa: S307 -- plain data only
            canon = plain(v)
        except Exception:  # noqa: BLE001 -- anything that is not plain data is not folded
            return None
        self._memo_value[key] = _freeze(v)
        # by the value alone: two names bound to one value compute the same (a reader's edge
        # says which it reads, and that is the value)
        return (f"fold {canon}", frozenset(read_units), frozenset(read_mods))

    # ---- reach ---------------------------------------------------------------------------
    def reach(self, roots) -> tuple[set[tuple[str, int]], set[tuple[str, str, str]], set[str]]:
        """From the root modules ``roots`` (all their units): the reached units ``{(module,
        index)}``, the edges ``{(unit hash, name read, target's content)}`` and the modules that
        run."""
        roots = tuple(sorted(roots))
        if roots not in self._memo_reach:
            self._memo_reach[roots] = self._reach(roots)
        return self._memo_reach[roots]

    def _unit_imports(self, key: tuple[str, int]) -> set[str]:
        return self._imported_modules(key[0], (n for n in ast.walk(self.unit(key).node)))

    def _reach(self, roots: tuple[str, ...]):
        units: set[tuple[str, int]] = set()
        aliases: set[tuple[str, int]] = set()
        edges: set[tuple[str, str, str]] = set()
        running: set[str] = set()
        todo: list[tuple[str, int]] = []
        mods_todo: list[str] = []
        by_value: set[tuple[str, int]] = set()
        self.read_by_value[roots] = by_value

        def run_module(mod: str) -> None:
            parts = mod.split(".") if mod else []
            for i in range(len(parts) + 1):  # the __init__ of each package on the way runs too
                p = ".".join(parts[:i])
                if p in self.mods and p not in running:
                    running.add(p)
                    mods_todo.append(p)

        def reach_whole(mod: str) -> None:
            if mod in self.mods:
                run_module(mod)
                todo.extend((mod, i) for i in range(len(self.mods[mod].units)))

        for r in roots:
            reach_whole(r)
            # what a root imports by name is its own too (a caller may call it through the root)
            if r in self.mods:
                for name, t in self.mods[r].imported.items():
                    t = self._follow(t)
                    if t[0] == "units":  # reached, hashed as any unit (the name is not)
                        todo.extend((t[1], j) for j in t[2])
        while todo or mods_todo:
            while mods_todo:
                mod = mods_todo.pop()
                m = self.mods[mod]
                for t in m.top_imports:
                    run_module(t)
                todo.extend((mod, i) for i, u in enumerate(m.units) if not u.pure)
            if not todo:
                continue
            key = todo.pop()
            if key in units or key in aliases:
                continue
            mod, i = key
            u = self.mods[mod].units[i]
            target = self._alias_of(self.mods[mod], u)
            if target is not None:  # ``run_params = _run_params``: the statement it names
                aliases.add(key)
                run_module(mod)
                todo.extend((target[1], j) for j in target[2])
                continue
            got = self.folded(key)
            if got is not None:  # a constant by value: what it was computed from is not reached
                units.add(key)
                run_module(mod)
                for rm in got[2]:
                    run_module(rm)
                by_value.update(got[1])
                continue
            units.add(key)
            run_module(mod)
            for t in self._unit_imports(key):  # imports inside a function run when it runs
                run_module(t)
            for label, t in self._canon(key):
                if t[0] == "units":
                    todo.extend((t[1], j) for j in t[2])
                elif t[0] == "whole":
                    reach_whole(t[1])
                edges.add((u.hash, label, self._content(t)))
        return units, edges, running

    def _content(self, t: tuple) -> str:
        if t[0] == "units":
            return "units:" + ",".join(sorted(self._hash(t[1], j) for j in t[2]))
        if t[0] == "whole":
            if t[1] not in self.mods:
                return f"module:{t[1]}"
            units = self.mods[t[1]].units
            if self.names:
                return "module:" + ",".join(sorted(self._hash(t[1], j) for j in range(len(units))))
            # reach-v3: a module used whole (handed to getattr, passed on) is looked up by name,
            # so there each unit counts with the names it binds
            return "module:" + ",".join(sorted(
                ",".join(sorted(units[j].binds)) + "=" + self._hash(t[1], j)
                for j in range(len(units))))
        if t[0] == "mod":
            return f"module:{t[1]}"
        if t[0] == "opaque" and self.fold:
            # reach-v2: what computes nothing counts by the name read, not by where it lives (a
            # page or a design helper moved to another module moves no digest)
            return "opaque:" + t[1].rsplit(".", 1)[-1]
        return f"{t[0]}:{t[1]}"

    def unit(self, key: tuple[str, int]) -> _Unit:
        """The unit ``(module, index)``, its canonical dump and hash set."""
        self._hash(*key)
        return self.mods[key[0]].units[key[1]]


_CACHE: dict[str, Index] = {}


def index(srcs: Mapping[str, str], not_computing: frozenset[str], fold: bool = True,
          names: bool = False) -> Index:
    """The :class:`Index` of ``srcs``, memoised on their content (a few recent ones); ``fold``:
    constants by value (:meth:`Index.folded`, rule ``reach-v2``), or by text (``reach-v1``);
    ``names``: a top-level function's name counts (rules before ``reach-v3``)."""
    h = hashlib.sha256((b"fold" if fold else b"text") + (b"+names" if names else b""))
    for k in sorted(srcs):
        h.update(k.encode() + b"\0" + srcs[k].encode() + b"\0")
    h.update(",".join(sorted(not_computing)).encode())
    key = h.hexdigest()
    if key not in _CACHE:
        if len(_CACHE) > 8:
            _CACHE.clear()
        _CACHE[key] = Index(srcs, not_computing, fold, names)
    return _CACHE[key]
