"""What an answer cell may not do: use the reference answer, hide code, or change the tests.

The grader runs the lecturer's copy of every cell except the student's answer cells, so
the tests cannot be edited; but an answer cell could still

- **use the reference answer**: import the course package's implementation of what the
  question asks for (``from course_utils.attention import scaled_dot_product_attention``),
  reach it through a module (``course_utils.attention.x``, a module alias bound by any
  cell, ``getattr``), or use another library's (``torch.nn.MultiheadAttention``);
- **hide code** from this check: ``importlib``, ``__import__``, ``exec``, ``eval``,
  ``sys.modules``, ``__globals__`` and the like, IPython magics;
- **change what the tests do**: monkeypatch a module or an object the tests use
  (``torch.testing.assert_close = ...``, ``setattr(torch, "allclose", ...)``) or rebind a
  name the locked cells define or the tests use (``bleu = ...``, ``len = ...``).

Which names are allowed is derived from the assignment's own read-only cells (not from a
hand-kept list): every ``course_utils`` name that a locked cell other than a test imports or
uses is handed to the student (data loading, ``train``, ``translate``, ``bleu``, the
configs, the recipes), and a number, string or None read off such a name (``recipe.lr``) is
data; every other ``course_utils`` name is a reference answer. Other libraries' reference
answers are listed in the source notebook's metadata (``course.reference_answers``, e.g.
``torch.nn.MultiheadAttention``; a module there forbids everything in it, a ``torch.Tensor``
method such as ``torch.Tensor.unfold`` every ``x.unfold(...)``). Names are compared
as the objects they resolve to, so a re-export or alias of a forbidden object is forbidden too.

An answer cell may import only the modules of ``ALLOWED_MODULES`` (torch and its public
submodules, math, numpy, ...; the course package name by name): any other import, a private
name (``torch._C``, ``torch._utils``), ``torch.ops`` and the rest of ``DENIED_NAMES``, and
``getattr`` with a computed name, a private one or a listed method's (``getattr(x, "unfold")``)
count as hidden code. Every finding, a reference answer included, zeroes every question after
the answer cell that holds it (the reason names the flagged definition the test reaches, when
it reaches one): a reference stored into an object by another statement cannot be traced.
The check reads code, it does not run it: it is meant to catch what a student would try,
and names what it found, so that a lecturer can look.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import importlib.util
import sys
import types
from dataclasses import dataclass, field

PACKAGE = "course_utils"
# Ways to reach code that a reading of the cell cannot follow.
DYNAMIC_CALLS = {"__import__", "exec", "eval", "compile", "globals", "vars", "get_ipython",
                 "breakpoint"}
DYNAMIC_MODULES = {"importlib", "inspect", "builtins", "runpy", "gc", "ctypes", "pickle", "marshal",
                   "pkgutil", "types"}
DYNAMIC_NAMES = {"sys.modules", "sys._getframe", "sys.meta_path"}
DYNAMIC_ATTRIBUTES = {"__globals__", "__dict__", "__builtins__", "__subclasses__", "__code__",
                      "__closure__", "__loader__", "__spec__", "__getattribute__", "__import__",
                      "__wrapped__", "__func__", "f_globals", "f_back",
                      # a builtin's module (print.__self__ is builtins), frames and tracebacks
                      # (their f_builtins hold eval): the red team of issue 37
                      "__self__", "f_builtins", "f_locals", "f_code", "gi_frame", "cr_frame", "ag_frame",
                      "tb_frame", "tb_next", "__traceback__"}
# What an answer cell may import (an allow-list, not a block-list: every other module is a
# door this reading cannot watch: pydoc.locate, timeit, operator.methodcaller, ...). The course
# package is checked name by name (what the read-only cells hand out); os and time are there
# because ordinary answers use them (a path check, a sleep), never to reach code by name.
ALLOWED_MODULES = {"torch", "math", "numpy", "collections", "itertools", "functools", "typing",
                   "dataclasses", "heapq", "re", "string", "statistics", "random", "copy", "os", "time",
                   "__future__"}
# Parts of allowed modules that reach code by name, load code, or run it elsewhere (private
# names, ``_x``, are refused everywhere).
DENIED_NAMES = {"torch.ops", "torch.hub", "torch.package", "torch.utils.cpp_extension", "torch.multiprocessing",
                "torch.distributed", "torch.utils.model_zoo", "torch.library", "torch.classes",
                "torch.utils.benchmark", "torch.utils.collect_env", "torch.utils.bottleneck", "torch.serialization",
                "numpy.f2py", "numpy.ctypeslib", "numpy.distutils", "typing.get_type_hints", "typing.ForwardRef",
                "string.Formatter", "os.sys",
                # they evaluate string annotations (typing.get_type_hints): code in a string
                "functools.singledispatch", "functools.singledispatchmethod"}
# Builtins that take an attribute's name as a string.
BY_NAME = {"getattr", "setattr", "delattr", "hasattr"}


@dataclass
class Finding:
    """One thing an answer cell does that the grader does not accept."""
    kind: str     # 'reference', 'dynamic' or 'monkeypatch'
    cell: str     # grade_id of the answer cell
    what: str     # e.g. 'course_utils.attention.scaled_dot_product_attention'
    at: int = -1  # index of the top-level statement of the cell that holds it

    def reason(self) -> str:
        where = f"answer cell '{self.cell}'"
        if self.kind == "reference":
            return f"uses {self.what}, the reference answer ({where})"
        if self.kind == "dynamic":
            return f"uses {self.what}, which hides code from the grader ({where})"
        return f"changes {self.what}, which the tests rely on ({where})"


@dataclass
class Report:
    """The findings of one submission and the questions (test grade_ids) they cost."""
    findings: list[Finding] = field(default_factory=list)
    zeroed: dict[str, str] = field(default_factory=dict)  # test grade_id -> reason

    @property
    def flags(self) -> list[str]:
        names = {"reference": "reference import", "dynamic": "hidden code", "monkeypatch": "monkeypatch"}
        return sorted({names[f.kind] for f in self.findings})


# --------------------------------------------------------------------------------------
# Reading a cell
# --------------------------------------------------------------------------------------

def parse(source: str) -> ast.Module | None:
    """The cell as Python (IPython magics turned into the calls they make), or None when it
    does not parse (such a cell raises when run, and can do nothing)."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
        source = TransformerManager().transform_cell(source)
    except Exception:  # IPython missing or a transform error: read the cell as it is
        pass
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    _read_string_annotations(tree)
    return tree


#: strings in strings deeper than this are not read: the annotation stands for ``eval`` of it
_ANNOTATION_DEPTH = 8


def _read_string_annotations(tree) -> None:
    """An annotation written as a string (``x: "torch.Tensor"``) is code that typing evaluates
    (``typing.get_type_hints``, ``functools.singledispatch``, TorchScript): it is replaced, in
    ``tree``, by the expression it holds, so that every check reads it (the red team of issue
    37 hid an ``__import__`` in one). A string that is not an expression stays a string. An
    iterative walk: a deeply nested cell is reported by ``check``, not lost here."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.arg, ast.AnnAssign)) and node.annotation is not None:
            node.annotation = _annotation(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            node.returns = _annotation(node.returns)


def _annotation(expression, depth: int = 0):
    """``expression`` with the strings that typing evaluates read as the expressions they hold:
    the annotation itself when it is a string, and strings among a subscript's arguments
    (``list["Tensor"]``), except ``Literal``'s, which stay strings."""
    def is_string(value):
        return isinstance(value, ast.Constant) and isinstance(value.value, str)

    def read(constant):
        if depth >= _ANNOTATION_DEPTH:   # what it stands for: a string evaluated
            return ast.copy_location(ast.Call(ast.Name("eval", ast.Load()), [constant], []), constant)
        try:
            inner = ast.parse(constant.value.strip(), mode="eval").body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return constant
        return ast.fix_missing_locations(ast.copy_location(_annotation(inner, depth + 1), constant))

    if is_string(expression):
        return read(expression)
    for node in ast.walk(expression):
        if not isinstance(node, ast.Subscript) or \
                (_dotted(node.value) or [""])[-1] == "Literal":
            continue
        if is_string(node.slice):
            node.slice = read(node.slice)
        elif isinstance(node.slice, ast.Tuple):
            node.slice.elts = [read(e) if is_string(e) else e for e in node.slice.elts]
    return expression


def bound_names(stmt: ast.stmt) -> set[str]:
    """Global names a top-level statement binds (def, class, import, assignment targets)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names if a.name != "*"}
    names = set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            if not _inside_function(stmt, node):
                names.add(node.id)
        elif isinstance(node, ast.Global):
            names.update(node.names)
    return names


def _inside_function(stmt, target) -> bool:
    for node in ast.walk(stmt):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)) and node is not stmt:
            if any(n is target for n in ast.walk(node)):
                return True
    return False


def loaded_names(tree: ast.AST) -> set[str]:
    """Every name the code reads (globals and locals alike: an over-approximation)."""
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def free_names(tree: ast.AST) -> set[str]:
    """The names the code reads and does not bind itself (at its top level or as a
    function's locals): the globals it needs from earlier cells."""
    bound = set()
    for stmt in tree.body if isinstance(tree, ast.Module) else [tree]:
        bound |= bound_names(stmt)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            bound |= _local_names(node)
    return loaded_names(tree) - bound


def _local_names(func) -> set[str]:
    """Parameters and names assigned inside a function (not declared global)."""
    args = func.args
    names = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    names |= {a.arg for a in (args.vararg, args.kwarg) if a}
    declared = set()
    for node in ast.walk(func):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Global):
            declared.update(node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not func:
            names.add(node.name)
    return names - declared


def _dotted(node) -> list[str] | None:
    """``a.b.c`` as ['a', 'b', 'c'], or None for anything that is not a plain chain."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id] + parts[::-1]
    return None


# --------------------------------------------------------------------------------------
# Names -> the objects they stand for
# --------------------------------------------------------------------------------------

# Modules the check may import to see what a name stands for; any other module is looked
# at only if something imported it already (reading a student's code must not run it).
IMPORTABLE = {PACKAGE, "torch", "tokenizers", "numpy", "collections", "math"}


def resolve(qualname: str):
    """The object ``qualname`` names (module, then attributes), or None."""
    parts = qualname.split(".")
    if parts[0] not in IMPORTABLE and parts[0] not in sys.modules:
        return None
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except Exception:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr, None)
            if obj is None:
                return None
        return obj
    return None


def _import_bindings(stmt) -> dict[str, str]:
    """name -> qualified name, for the names an import statement binds."""
    out = {}
    if isinstance(stmt, ast.Import):
        for a in stmt.names:
            out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
    elif isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
        for a in stmt.names:
            if a.name != "*":
                out[a.asname or a.name] = f"{stmt.module}.{a.name}"
    return out


def imports_of(stmt) -> dict[str, str]:
    """name -> qualified name, for every import anywhere inside ``stmt``."""
    imported = {}
    for node in ast.walk(stmt):
        imported.update(_import_bindings(node))
    return imported


class Names:
    """What each global name stands for, as the notebook's cells run in order."""

    def __init__(self, other: "Names | None" = None):
        self.qualname: dict[str, str] = {**other.qualname} if other else {}  # name -> imported as
        self.origin: dict[str, str] = {**other.origin} if other else {}      # name -> who imported it

    def update(self, tree, origin: str = "locked") -> None:
        """Follow the top-level statements of ``tree`` (a cell or one statement): imports
        bind qualified names, any other binding makes the name something else."""
        for stmt in tree.body if isinstance(tree, ast.Module) else [tree]:
            imported = imports_of(stmt)
            aliased = {}   # `_T = torch.Tensor`: the name stands for that chain, so `_T.clone = f` patches torch
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                chain = _dotted(stmt.value) if isinstance(stmt.value, (ast.Attribute, ast.Name)) else None
                if chain and chain[0] in self.qualname:
                    aliased[stmt.targets[0].id] = ".".join([self.qualname[chain[0]]] + chain[1:])
            for name in bound_names(stmt) - set(imported) - set(aliased):
                self.qualname.pop(name, None)
            self.qualname.update(imported)
            self.origin.update(dict.fromkeys(imported, origin))
            self.qualname.update(aliased)
            self.origin.update(dict.fromkeys(aliased, origin))

    def qualify(self, parts: list[str], local: set[str]) -> str | None:
        """The qualified name of the chain ``parts`` if its root is an imported global."""
        if parts[0] in local or parts[0] not in self.qualname:
            return None
        return ".".join([self.qualname[parts[0]]] + parts[1:])


def _findable(module: str) -> bool:
    try:
        return module in sys.modules or importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _is_module(obj) -> bool:
    return type(obj).__name__ == "module"


def _private(part: str) -> bool:
    """``_x`` (not a dunder such as ``__init__``: those of concern are DYNAMIC_ATTRIBUTES)."""
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


_denied_ids: dict[int, str] = {}


def outside_allowed(qual: str, handed: frozenset = frozenset()) -> str | None:
    """Why the module or attribute chain ``qual`` is out of an answer's reach (None when it
    is not): a module not in ALLOWED_MODULES (or in ``handed``, the modules the read-only
    cells import from: ``pathlib`` for ``Path``), a private name, or one of DENIED_NAMES (also
    under another name: ``torch.sys`` is the module sys)."""
    parts = qual.split(".")
    allowed = ALLOWED_MODULES | handed
    if parts[0] == PACKAGE:
        return None  # checked name by name (Rules.verdict)
    if parts[0] not in allowed:
        return f"import {parts[0]}, not a module an answer may import"
    if any(_private(p) for p in parts[1:]):
        return f"{qual}, a private name"
    if parts[0] == "os" and len(parts) > 1 and parts[1] != "path":
        return f"{qual} (of os, only os.path may be used: no processes, no environment)"
    for denied in DENIED_NAMES:
        if qual == denied or qual.startswith(denied + "."):
            return qual
    if not _denied_ids:
        for denied in DENIED_NAMES:  # the ones already loaded (importing numpy.distutils would warn)
            obj = sys.modules.get(denied.split(".")[0])
            for attr in denied.split(".")[1:]:
                obj = getattr(obj, attr, None) if obj is not None else None
            if obj is not None:
                _denied_ids[id(obj)] = denied
    for i in range(2, len(parts) + 1):  # every prefix: a module reached as an attribute is imported
        prefix = ".".join(parts[:i])
        obj = resolve(prefix)
        if obj is None:
            return None
        if id(obj) in _denied_ids:
            return f"{prefix} ({_denied_ids[id(obj)]})"
        if _is_module(obj) and prefix != "os.path":  # posixpath, under the name the check allows
            name = getattr(obj, "__name__", "") or ""
            if name.split(".")[0] not in allowed | {PACKAGE} or any(_private(p) for p in name.split(".")[1:]) \
                    or any(name == d or name.startswith(d + ".") for d in DENIED_NAMES) \
                    or (name == "os" and i > 1 and prefix != "os"):
                return f"{prefix} (the module {name})"
    return None


def walk_scoped(node, local=frozenset()):
    """Every node under ``node`` with the names that are local where it stands (parameters
    and assignments of the enclosing functions; class bodies do not make names local)."""
    yield node, local
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        inner = local | _local_names(node)
        for child in node.decorator_list + [node.args] + ([node.returns] if node.returns else []):
            yield from walk_scoped(child, local)  # (the return annotation runs where the function is made)
        for child in node.body:
            yield from walk_scoped(child, inner)
        return
    if isinstance(node, ast.Lambda):
        inner = local | {a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs}
        yield from walk_scoped(node.body, inner)
        return
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        # the targets of a comprehension are its own: they never touch a global
        inner = local | {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        for child in ast.iter_child_nodes(node):
            yield from walk_scoped(child, inner)
        return
    for child in ast.iter_child_nodes(node):
        yield from walk_scoped(child, local)


def global_reads(tree) -> set[str]:
    """The global names the code reads (not a function's, a lambda's or a comprehension's own)."""
    return {n.id for n, local in walk_scoped(tree)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in local}


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _own_nodes(func):
    """The nodes of function ``func``'s own scope: not those of functions, lambdas or classes
    nested in it (their default values and decorators are in it; nothing else of theirs)."""
    todo = list(ast.iter_child_nodes(func))
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, _SCOPES):
            todo += [*node.decorator_list] if not isinstance(node, ast.Lambda) else []
            if not isinstance(node, ast.ClassDef):
                todo += [d for d in node.args.defaults + node.args.kw_defaults if d is not None]
            continue
        todo += list(ast.iter_child_nodes(node))


def _params(func) -> set[str]:
    a = func.args
    return {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg] if x is not None}


def _function_scope(func, scope: "Names") -> tuple[set[str], dict[str, str]]:
    """(the names ``func`` binds itself: its parameters and every name it assigns or deletes;
    name -> the imported chain it stands for, for each that ``func`` binds only by plain
    assignments of a chain rooted in an imported global, ``T = torch.Tensor``). Any other
    binding of the name in the function (a parameter, another value, a loop target, a
    ``global``) and it is the function's own object. One walk of the function's own nodes."""
    params = _params(func)
    bound, stores, not_alias = set(params), {}, set(params)
    assigned = {}   # id(target Name) -> the chain assigned to it
    for node in _own_nodes(func):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
            stores.setdefault(node.id, []).append(id(node))
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            not_alias.update(node.names)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, (ast.Attribute, ast.Name)):
            assigned[id(node.targets[0])] = _dotted(node.value)
    chains = {name: [assigned.get(i) for i in ids] for name, ids in stores.items() if name not in not_alias}
    chains = {name: rhs for name, rhs in chains.items() if None not in rhs}
    aliases: dict[str, str] = {}
    changed = True
    while changed:   # `t = torch.testing; tt = t`: an alias of an alias, in any order
        changed = False
        for name, rhs in chains.items():
            if name in aliases:
                continue
            quals = {".".join([aliases[c[0]]] + c[1:]) if c[0] in aliases
                     else None if c[0] in bound | not_alias else scope.qualify(c, set()) for c in rhs}
            if len(quals) == 1 and None not in quals:
                aliases[name] = quals.pop()
                changed = True
    return bound, aliases


def _local_alias(parts, node, parents, scopes) -> str | None:
    """The imported chain that the local chain ``parts`` stands for where ``node`` stands:
    found in the innermost enclosing function that binds ``parts[0]`` (``scopes``: id of a
    function -> its _function_scope)."""
    at = parents.get(id(node))
    while at is not None:
        if id(at) in scopes:
            bound, aliases = scopes[id(at)]
            if parts[0] in aliases:
                return ".".join([aliases[parts[0]]] + parts[1:])
            if parts[0] in bound:
                return None   # the function's own name, not an alias
        at = parents.get(id(at))
    return None


def _parents(tree) -> dict[int, ast.AST]:
    return {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


# --------------------------------------------------------------------------------------
# The rules
# --------------------------------------------------------------------------------------

#: exact types of values that are data, never code (a subclass, which could be callable, is not)
_PLAIN_TYPES = (bool, int, float, complex, str, bytes, type(None))


def _plain_data(obj) -> bool:
    """Whether ``obj`` is a number, a string or None, or a tuple or frozenset of them: a value
    read off a handed object (``recipe.lr``), which answers no question."""
    if type(obj) in _PLAIN_TYPES:
        return True
    return type(obj) in (tuple, frozenset) and all(_plain_data(x) for x in obj)


def _identity(obj) -> int | tuple[int, int]:
    """What a name stands for, compared by identity: a bound method by its instance and
    function (each attribute lookup makes a new bound method object), anything else itself."""
    if isinstance(obj, types.MethodType):
        return id(obj.__self__), id(obj.__func__)
    return id(obj)


def _forbidden_key(obj) -> int:
    """A listed reference answer by its function: a classmethod listed through its class is the
    same answer however it is reached."""
    return id(obj.__func__) if isinstance(obj, types.MethodType) else id(obj)


class Rules:
    """Allowed and forbidden names of one assignment, from its source notebook's cells
    (``is_answer``, ``is_test``: which cells are answers and tests) and the other libraries'
    reference answers named in its metadata."""

    def __init__(self, source_cells, reference_answers=(), *, is_answer, is_test):
        self.allowed = set()      # identities of course_utils objects the read-only cells hand out
        self.forbidden = {}       # id -> qualified name, of other libraries' reference answers
        self.forbidden_modules = []
        self.forbidden_methods = {}  # name -> qualified name, of listed torch.Tensor methods (x.unfold(...))
        for qual in reference_answers:
            obj = resolve(qual)
            if obj is None and "." not in qual and _findable(qual):
                self.forbidden_modules.append(qual)  # an installed library (transformers), all of it: found, not imported
                continue
            if obj is None:
                raise ValueError(f"reference answer {qual!r} (notebook metadata course.reference_answers) "
                                 "does not name an importable object")
            if _is_module(obj):
                self.forbidden_modules.append(qual)
            else:
                self.forbidden[_forbidden_key(obj)] = qual
                if qual.startswith("torch.Tensor.") and qual.count(".") == 2:
                    self.forbidden_methods[qual.rsplit(".", 1)[1]] = qual
        names = Names()
        for cell in source_cells:
            if cell.cell_type != "code" or is_answer(cell):
                continue
            tree = parse(cell.source)
            if tree is None:
                continue
            names.update(tree)
            if is_test(cell):
                continue
            for node in ast.walk(tree):
                quals = list(_import_bindings(node).values())
                parts = _dotted(node) if isinstance(node, ast.Attribute) else None
                qual = names.qualify(parts, set()) if parts else None
                for qual in quals + ([qual] if qual else []):
                    obj = resolve(qual)
                    if qual.startswith(PACKAGE + ".") and obj is not None and not _is_module(obj):
                        self.allowed.add(_identity(obj))

    def holds_reference(self, qual: str) -> bool:
        """Whether ``qual`` is a module that holds a reference answer (course_utils, or a
        module a listed answer lives in)."""
        module = resolve(qual)
        if not _is_module(module):
            return False
        listed = list(self.forbidden.values()) + self.forbidden_modules
        if qual.split(".")[0] == PACKAGE or any(f == qual or f.startswith(qual + ".") for f in listed):
            return True
        # by object too: torch.nn.modules.activation holds torch.nn.MultiheadAttention under another name
        name = getattr(module, "__name__", "")
        return (any(name == m or name.startswith(m + ".") for m in self.forbidden_modules)
                or any(_forbidden_key(v) in self.forbidden for v in list(vars(module).values())))

    def verdict(self, qual: str) -> str | None:
        """'reference' when ``qual`` names a reference answer, 'dynamic' when it is a way
        around this check, else None."""
        root = qual.split(".")[0]
        if root in DYNAMIC_MODULES or any(qual == d or qual.startswith(d + ".") for d in DYNAMIC_NAMES):
            return "dynamic"
        if any(qual == m or qual.startswith(m + ".") for m in self.forbidden_modules):
            return "reference"
        obj = resolve(qual)
        if obj is None or _is_module(obj):
            return None
        if "." in qual:
            parent = resolve(qual.rsplit(".", 1)[0])
            if _plain_data(parent):
                return None  # a method of a number or a string (recipe.lr.hex)
            if _plain_data(obj) and not _is_module(parent) and _identity(parent) in self.allowed:
                return None  # a number read off a handed object (recipe.lr); not a module's __file__
        if _forbidden_key(obj) in self.forbidden:
            return "reference"
        home = root if root == PACKAGE else (getattr(obj, "__module__", None) or "").split(".")[0]
        if home == PACKAGE and _identity(obj) not in self.allowed:
            return "reference"  # also a course_utils object re-exported by another module
        return None


def check_cell(tree, gid: str, names: Names, rules: Rules, own: set[str]) -> list[Finding]:
    """The findings of one answer cell. ``names``: what the globals stand for before it
    runs (updated with its imports); ``own``: names the answers define (never imported
    objects, free to rebind)."""
    found = []
    parents = _parents(tree)
    handed = frozenset(q.split(".")[0] for n, q in names.qualname.items() if names.origin.get(n) == "locked")
    for k, stmt in enumerate(tree.body):
        def add(kind, what):
            if not any(f.kind == kind and f.what == what and f.at == k for f in found):
                found.append(Finding(kind, gid, what, k))

        scope = Names(names)
        scope.update(stmt, origin="this")
        # `T = torch.Tensor` inside a function: a name that its function binds only by such
        # assignments stands for that chain there (rebound to anything else, it does not)
        scopes = {id(f): _function_scope(f, scope) for f in ast.walk(stmt)
                  if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))}

        def qualify(parts, local, node):
            qual = scope.qualify(parts, local)
            if qual is None and parts[0] in local:
                qual = _local_alias(parts, node, parents, scopes)
            return qual

        for node, local in walk_scoped(stmt):
            for qual in _import_bindings(node).values():
                kind = rules.verdict(qual)
                if kind:
                    add(kind, qual)
                if not _findable(qual.split(".")[0]):  # e.g. a file the answer wrote itself
                    add("dynamic", f"import {qual.split('.')[0]}, a module that is not installed")
                elif not kind and outside_allowed(qual, handed):
                    add("dynamic", outside_allowed(qual, handed))
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    add("dynamic", "a relative import")
                elif any(a.name == "*" for a in node.names) and (
                        (node.module or "").split(".")[0] == PACKAGE or rules.verdict(node.module or "")):
                    add("reference", f"{node.module}.*")
            parts = _dotted(node) if isinstance(node, (ast.Attribute, ast.Name)) else None
            qual = scope.qualify(parts, local) if parts else None
            if parts and len(parts) == 1 and scope.origin.get(parts[0]) == "answer":
                qual = None  # a name an earlier answer imported: flagged where it was imported
            if qual and isinstance(node.ctx, ast.Load):
                kind = rules.verdict(qual)
                if kind:
                    add(kind, qual)
                elif not isinstance(parents.get(id(node)), ast.Attribute) and outside_allowed(qual, handed):
                    add("dynamic", outside_allowed(qual, handed))  # torch._C..., torch.ops..., os.sys
                parent = parents.get(id(node))
                if not isinstance(parent, ast.Attribute) and rules.holds_reference(qual):
                    add("dynamic", f"the module {qual} as a value")  # passed around, then used
            if isinstance(node, ast.Attribute) and node.attr in rules.forbidden_methods and qual is None:
                add("reference", rules.forbidden_methods[node.attr])  # a tensor's method: x.<name>(...)
            if isinstance(node, ast.Attribute) and node.attr in DYNAMIC_ATTRIBUTES:
                add("dynamic", f".{node.attr}")
            if isinstance(node, ast.Name) and node.id.startswith("_grader") and node.id not in local:
                add("dynamic", f"{node.id}, a name of the grader's")  # the probe's own, while it runs
            if isinstance(node, ast.Name) and node.id in DYNAMIC_CALLS and node.id not in local | own:
                add("dynamic", f"{node.id}()")
            if isinstance(node, ast.Name) and node.id in BY_NAME and node.id not in local | own:
                parent = parents.get(id(node))
                if not (isinstance(parent, ast.Call) and parent.func is node):
                    add("dynamic", f"{node.id} as a value")  # functools.partial(getattr, x), map(getattr, ...)
                else:
                    attr = parent.args[1] if len(parent.args) > 1 else None
                    name = attr.value if isinstance(attr, ast.Constant) and isinstance(attr.value, str) else None
                    if name is None:
                        add("dynamic", f"{node.id}(..., <computed name>)")
                    elif name in rules.forbidden_methods:
                        add("dynamic", f"{node.id}(..., {name!r}), the listed {rules.forbidden_methods[name]}")
                    elif _private(name) or name in DYNAMIC_ATTRIBUTES:
                        add("dynamic", f"{node.id}(..., {name!r})")
            if isinstance(node, ast.keyword) and (node.arg, getattr(node.value, "value", None)) in (
                    ("weights_only", False), ("allow_pickle", True)):
                add("dynamic", f"{node.arg}={node.value.value} (unpickling runs code)")
            if isinstance(node, ast.Constant) and node.value in ("weights_only", "allow_pickle",
                                                                  "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"):
                add("dynamic", f"{node.value!r} as a string (unpickling runs code)")  # **{'weights_only': False}
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in local \
                    and scope.qualname.get(node.id) == "os" and not isinstance(parents.get(id(node)), ast.Attribute):
                add("dynamic", "the module os as a value")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args \
                    and node.func.id in ("getattr", "setattr", "delattr") and node.func.id not in local | own:
                base = _dotted(node.args[0])
                base_qual = qualify(base, local, node) if base else None
                attr = node.args[1] if len(node.args) > 1 else None
                name = attr.value if isinstance(attr, ast.Constant) and isinstance(attr.value, str) else None
                if base_qual and node.func.id != "getattr":
                    add("monkeypatch", f"{base_qual}.{name or '<computed name>'}")
                elif base_qual and name is None:
                    add("dynamic", f"getattr({base_qual}, <computed name>)")
                elif base_qual and rules.verdict(f"{base_qual}.{name}"):
                    add(rules.verdict(f"{base_qual}.{name}"), f"{base_qual}.{name}")
            # writing into an imported module or object
            if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, (ast.Store, ast.Del)):
                base = _dotted(node.value)
                base_qual = qualify(base, local, node) if base else None
                if base_qual is None and base and base[0] not in local | own and hasattr(builtins, base[0]):
                    base_qual = ".".join(base)
                if base_qual:
                    add("monkeypatch", base_qual + (f".{node.attr}" if isinstance(node, ast.Attribute) else "[...]"))
        names.update(stmt, origin="answer")
    return found


def check(cells, rules: Rules, *, is_answer, is_test, grade_id, answer_names: set[str]) -> Report:
    """Check every answer cell of ``cells`` (the notebook the grader will run, in order)
    and decide which test cells score 0. ``answer_names``: the names the lecturer's
    solutions bind (what answers are expected to define)."""
    trees = {i: parse(c.source) for i, c in enumerate(cells) if c.cell_type == "code"}
    trees = {i: t for i, t in trees.items() if t is not None}
    bound = {i: {n for stmt in t.body for n in bound_names(stmt)} for i, t in trees.items()}
    read_only = [i for i in trees if not is_answer(cells[i])]
    reads = {i: global_reads(trees[i]) for i in read_only}
    names, report = Names(), Report()
    index_of = {}
    locked_defs: set[str] = set()   # functions, classes and private names the read-only cells define
    for i, tree in trees.items():
        cell = cells[i]
        if not is_answer(cell):
            names.update(tree)
            if is_test(cell):  # hidden tests are not in the student's notebook: their names
                continue       # are free to use (rebinding one a later test reads: _read_later)
            for stmt in tree.body:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    locked_defs.add(stmt.name)
                else:
                    locked_defs |= {n for n in bound_names(stmt) if n.startswith("_") and not n.startswith("__")}
            continue
        index_of[grade_id(cell)] = i
        own = answer_names | bound[i]
        before = dict(names.qualname)
        try:
            findings = check_cell(tree, grade_id(cell), names, rules, own)
        except RecursionError:  # a reading of it would not end: it runs, unread, and costs what follows
            report.findings.append(Finding("dynamic", grade_id(cell), "code nested too deeply to be read", 0))
            names.update(tree, origin="answer")
            continue
        # rebinding a name that a later read-only cell reads before binding it again (an
        # import of the very object the name stood for changes nothing)
        for k, stmt in enumerate(tree.body):
            imported = imports_of(stmt)
            for name in sorted(bound_names(stmt) - answer_names):
                same = name in imported and name in before and resolve(before[name]) is not None
                if same and resolve(imported[name]) is resolve(before[name]):
                    continue
                if _read_later(name, [j for j in read_only if j > i], reads, bound):
                    findings.append(Finding("monkeypatch", grade_id(cell), name, k))
        # rebinding, or writing into, a function, class or private name that an earlier
        # read-only cell defined: the lecturer's code (a counter the tests call, its helpers)
        # runs later with what the answer put there
        for k, stmt in enumerate(tree.body):
            for name in sorted((bound_names(stmt) & locked_defs) - answer_names):
                findings.append(Finding("monkeypatch", grade_id(cell), name, k))
            for node, local in walk_scoped(stmt):
                if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, (ast.Store, ast.Del)):
                    base = _dotted(node.value)
                    if base and base[0] in locked_defs and base[0] not in local:
                        findings.append(Finding("monkeypatch", grade_id(cell), ".".join(base), k))
        report.findings += findings
    # which test cells it costs: every one after the answer cell that holds a finding, of
    # whatever kind. (A reference answer once cost only the questions whose code reached it;
    # a reference stored into an object by a later statement, `_impl["f"] = ref`,
    # `Model.forward = ref.forward`, `_impl.update(f=ref)`, was never traced back to them.)
    # The reason given: the flagged definition the test's code reaches, if it reaches one,
    # else the first finding before it.
    ordered = sorted(report.findings, key=lambda f: (index_of[f.cell], f.at))
    flagged = {}
    for f in report.findings:
        flagged.setdefault((index_of[f.cell], f.at), []).append(f)
    defs: dict[str, tuple[int, int, ast.stmt]] = {}  # name -> its last binding so far
    for j, tree in trees.items():
        cell = cells[j]
        before = [f for f in ordered if index_of[f.cell] < j]
        if is_test(cell) and before:
            hit = _reaches(tree, defs, flagged)
            if hit:
                name, f = hit
                report.zeroed[grade_id(cell)] = (f.reason() if name == f.what.split(".")[-1]
                                                 else f.reason()[:-1] + f", through {name})")
            else:
                first = next((f for f in before if f.kind != "reference"), before[0])
                report.zeroed[grade_id(cell)] = first.reason()
        for k, stmt in enumerate(tree.body):
            for name in bound_names(stmt):
                defs[name] = (j, k, stmt)
    return report


def _read_later(name, later, reads, bound) -> bool:
    """Whether one of the read-only cells ``later`` (in order) reads ``name`` before one of
    them binds it again (a cell that binds it itself reads its own value)."""
    for j in later:
        if name in bound[j]:
            return False
        if name in reads[j]:
            return True
    return False


def _reaches(tree, defs, flagged):
    """(name, finding) of the first flagged definition that the test cell ``tree`` reaches,
    following names through ``defs`` (name -> its last binding in the cells before it)."""
    todo, seen = sorted(free_names(tree)), set()
    while todo:
        name = todo.pop(0)
        if name in seen or name not in defs:
            continue
        seen.add(name)
        i, k, stmt = defs[name]
        if (i, k) in flagged:
            found = flagged[(i, k)]
            return name, next((f for f in found if f.what.split(".")[-1] == name), found[0])
        todo += sorted(free_names(stmt) - seen)
    return None
