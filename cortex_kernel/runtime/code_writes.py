"""What a piece of Python code names, and where it may write into existing objects.

Read statically (:mod:`ast`), before the code runs: :func:`code_names` tells a
snapshot which objects the code could touch (:mod:`.changes`), and
:func:`risky_writes` lets a permission mode ask before code that assigns into
an object of the user's: ``df[...] = …``, ``df.loc[...] = …``, ``x.attr = …``,
``lst += …``, ``del x[...]``, ``del x``, ``setattr(x, …)``, ``out=x``, and
the calls that mutate in place (``.append``/``.update``/``.pop``… by the
object's type, any call with ``inplace=True``); and before code that binds
one of the user's names to something else (``df = df.dropna()``), which
leaves the object alone but replaces what the name holds.

It is a reading, not a proof: a write through an alias the code did not make
by plain assignment (a function's argument, ``globals()``, ``exec``) is not
seen, and an assignment inside a loop is taken in textual order. What a run
really changed is what :func:`cortex_kernel.runtime.changes.diff` reports.
"""

from __future__ import annotations

import ast
import re
import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["code_names", "risky_writes"]

# Methods that change their object in place, by the object's type.
_LIST = frozenset({"append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse"})
_DICT = frozenset({"update", "pop", "popitem", "clear", "setdefault"})
_SET = frozenset(
    {
        "add",
        "update",
        "discard",
        "remove",
        "pop",
        "clear",
        "difference_update",
        "intersection_update",
        "symmetric_difference_update",
    }
)
_NDARRAY = frozenset({"fill", "sort", "resize", "put", "partition", "setfield", "itemset"})
_PANDAS = frozenset({"insert", "pop", "update"})  # and any call with inplace=True
# An object of a type not known here (or no namespace to look it up in).
_ANY = _LIST | _DICT | _SET | _NDARRAY | _PANDAS

# Values that ``+=`` rebinds rather than changes: an augmented assignment on
# a name bound to one of these is not a write into an object.
_IMMUTABLE = (int, float, complex, str, bytes, bool, tuple, frozenset, type(None))
_NOT_DATA = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type)

# IPython line magics and shell escapes, blanked so the rest of a cell parses.
_MAGIC_LINE = re.compile(r"^([ \t]*)[%!].*$", re.MULTILINE)


@dataclass(frozen=True)
class RiskyWrite:
    """One place where code may change an existing object in place.

    Attributes
    ----------
    name
        The namespace name whose object is written into.
    kind
        What the write is: ``"item assignment"``, ``"attribute assignment"``,
        ``"augmented assignment"``, ``"item deletion"``, ``"attribute deletion"``,
        ``"name deletion"``, ``"name rebinding"``, ``"in-place method"`` or
        ``"output argument"``.
    line
        The line of the code (1-based).
    source
        The statement's or call's source text (shortened).
    via
        The name the code wrote through, when it is an alias the code made
        (``y = df; y['a'] = 1``), else ``None``.
    """

    name: str
    kind: str
    line: int
    source: str
    via: str | None = None

    def describe(self) -> str:
        """A line for a permission prompt: ``line 2: df['a'] = 1 (item assignment into df)``."""
        into = {"name deletion": "deletes", "name rebinding": "replaces"}.get(
            self.kind, f"{self.kind} into"
        )
        alias = f", through its alias {self.via}" if self.via else ""
        return f"line {self.line}: {self.source} ({into} {self.name}{alias})"


def parse_code(code: str) -> ast.Module | None:
    """Parse ``code``; IPython magic and shell lines are blanked first if it does not parse.

    Returns ``None`` when it still does not parse: Python then refuses to run
    any of it, so it changes nothing.
    """
    try:
        return ast.parse(code)
    except SyntaxError:
        pass
    try:
        return ast.parse(_MAGIC_LINE.sub(r"\1pass", code))
    except SyntaxError:
        return None


def code_names(code: str) -> frozenset[str]:
    """Every name the code reads, binds or deletes, attribute and subscript bases included.

    ``df.loc[df.a > 0, "b"] = x`` names ``df`` and ``x``. Code that does not
    parse names nothing.
    """
    tree = parse_code(code)
    if tree is None:
        return frozenset()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            found.update(node.names)
    return frozenset(found)


def risky_writes(code: str, namespace: Mapping[str, Any] | None = None) -> list[RiskyWrite]:
    """The writes into existing objects that ``code`` makes, in source order.

    Parameters
    ----------
    code
        Python source (IPython magic lines are skipped).
    namespace
        The namespace the code will run in: only writes into its names count
        (names starting with ``_``, modules, functions and classes aside),
        and a method counts as mutating by the bound object's type. Without
        it, every name the code did not bind itself counts.

    Returns
    -------
    list of RiskyWrite
        Empty when nothing is written into an existing object, or when the
        code does not parse (then it does not run at all).
    """
    tree = parse_code(code)
    if tree is None:
        return []
    finder = _Finder(code, namespace)
    finder.visit(tree)
    return finder.found


def _base(node: ast.expr) -> ast.Name | None:
    """The name under a chain of attributes, subscripts and calls: ``df`` of ``df.loc[0].x``."""
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node if isinstance(node, ast.Name) else None


class _Finder(ast.NodeVisitor):
    """Walks the code in source order, following the names the code binds itself."""

    def __init__(self, code: str, namespace: Mapping[str, Any] | None) -> None:
        self.code = code
        self.namespace = namespace
        # Names the code bound: to the user's name they alias, or None (a new object).
        self.local: dict[str, str | None] = {}
        self.found: list[RiskyWrite] = []

    # -- which object a name stands for -------------------------------------

    def resolve(self, name: str) -> str | None:
        """The user's name whose object ``name`` is at this point, or ``None``."""
        if name in self.local:
            return self.local[name]
        if name.startswith("_"):
            return None
        if self.namespace is None:
            return name
        if name not in self.namespace or isinstance(self.namespace[name], _NOT_DATA):
            return None
        return name

    def alias_of(self, value: ast.expr | None) -> str | None:
        return self.resolve(value.id) if isinstance(value, ast.Name) else None

    def value_of(self, name: str) -> Any:
        return None if self.namespace is None else self.namespace.get(name)

    def add(self, node: ast.AST, name: ast.Name, kind: str) -> None:
        owner = self.resolve(name.id)
        if owner is None:
            return
        source = ast.get_source_segment(self.code, node) or ""
        source = " ".join(source.split())
        if len(source) > 80:
            source = source[:79] + "…"
        via = name.id if name.id != owner else None
        self.found.append(RiskyWrite(owner, kind, getattr(node, "lineno", 0), source, via))

    # -- binding ------------------------------------------------------------

    def bind(self, target: ast.expr, alias: str | None, statement: ast.AST) -> None:
        """A target of an assignment (or loop, with): a name rebinds, others write."""
        if isinstance(target, ast.Name):
            # A user's name given another value: their object is no longer under it.
            if self.namespace is not None and self.resolve(target.id) == target.id:
                self.add(statement, target, "name rebinding")
            self.local[target.id] = alias
        elif isinstance(target, ast.Tuple | ast.List):
            # Unpacked parts of a user's object are parts of it still.
            for element in target.elts:
                self.bind(element, alias, statement)
        elif isinstance(target, ast.Starred):
            self.bind(target.value, None, statement)  # a new list
        elif isinstance(target, ast.Subscript | ast.Attribute):
            self.visit(target)  # reads inside it (an index expression) come first
            base = _base(target)
            if base is not None:
                kind = "item" if isinstance(target, ast.Subscript) else "attribute"
                self.add(statement, base, f"{kind} assignment")

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for target in node.targets:
            self.bind(target, self.alias_of(node.value), node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
            self.bind(node.target, self.alias_of(node.value), node)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self.local[node.target.id] = self.alias_of(node.value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        target = node.target
        if isinstance(target, ast.Name):
            owner = self.resolve(target.id)
            # ``lst += …`` extends the list itself; ``n += 1`` rebinds n.
            if owner is not None and not isinstance(self.value_of(owner), _IMMUTABLE):
                self.add(node, target, "augmented assignment")
            elif self.namespace is not None and owner == target.id:
                self.add(node, target, "name rebinding")  # the user's n, now another value
            return
        self.visit(target)
        base = _base(target)
        if base is not None:
            self.add(node, base, "augmented assignment")

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            if isinstance(target, ast.Name):
                if target.id not in self.local:
                    self.add(node, target, "name deletion")
                self.local[target.id] = None
                continue
            self.visit(target)
            base = _base(target)
            if base is not None:
                kind = "item" if isinstance(target, ast.Subscript) else "attribute"
                self.add(node, base, f"{kind} deletion")

    def iterated(self, iterable: ast.expr) -> str | None:
        """The user's name whose items a loop walks (``for row in rows``, ``d.items()``)."""
        base = _base(iterable)
        return self.resolve(base.id) if base is not None else None

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        # A write into a loop variable is a write into the iterated object's items.
        self.bind(node.target, self.iterated(node.iter), node)
        for statement in node.body + node.orelse:
            self.visit(statement)

    visit_AsyncFor = visit_For

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self.bind(item.optional_vars, None, node)
        for statement in node.body:
            self.visit(statement)

    visit_AsyncWith = visit_With

    def visit_comprehension(self, node: ast.comprehension) -> None:
        self.visit(node.iter)
        self.bind(node.target, self.iterated(node.iter), node)
        for condition in node.ifs:
            self.visit(condition)

    def visit_ListComp(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp) -> None:
        # A comprehension's variables are its own: they do not leak past it.
        saved = dict(self.local)
        for generator in node.generators:
            self.visit(generator)
        self.visit(node.elt)
        self.local = saved

    visit_SetComp = visit_GeneratorExp = visit_ListComp

    def visit_DictComp(self, node: ast.DictComp) -> None:
        saved = dict(self.local)
        for generator in node.generators:
            self.visit(generator)
        self.visit(node.key)
        self.visit(node.value)
        self.local = saved

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        for alias in node.names:
            self.local[(alias.asname or alias.name).split(".")[0]] = None

    visit_ImportFrom = visit_Import

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        # The body may run later (when called): its writes into globals count;
        # the names it binds are its own.
        saved = dict(self.local)
        self.generic_visit(node)
        self.local = saved
        self.local[node.name] = None

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        saved = dict(self.local)
        self.generic_visit(node)
        self.local = saved
        self.local[node.name] = None

    # -- calls --------------------------------------------------------------

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        func = node.func
        if isinstance(func, ast.Name) and func.id in {"setattr", "delattr"} and node.args:
            first = node.args[0]
            if isinstance(first, ast.Name):
                self.add(node, first, "attribute assignment")
        for keyword in node.keywords:
            if keyword.arg == "out" and isinstance(keyword.value, ast.Name):
                self.add(node, keyword.value, "output argument")
        if not isinstance(func, ast.Attribute):
            return
        base = _base(func.value)
        if base is None:
            return
        inplace = any(
            k.arg == "inplace" and isinstance(k.value, ast.Constant) and k.value.value is True
            for k in node.keywords
        )
        if inplace or func.attr in self.mutators(func.value, base):
            self.add(node, base, "in-place method")

    def mutators(self, receiver: ast.expr, base: ast.Name) -> frozenset[str]:
        """The mutating method names of the object a method is called on."""
        owner = self.resolve(base.id)
        if owner is None:
            return frozenset()
        if receiver is not base:
            return _ANY  # a part of the object (``df['a'].update``): its type is unknown here
        value = self.value_of(owner)
        if self.namespace is None or base.id in self.local:
            return _ANY
        for kind, names in ((list, _LIST), (dict, _DICT), (set, _SET)):
            if isinstance(value, kind):
                return names
        module = type(value).__module__.split(".")[0]
        if module == "numpy":
            return _NDARRAY
        if module == "pandas":
            return _PANDAS
        return frozenset()  # another type: only inplace=True says so
