"""What only the text of an answer cell can show: that it names a reference answer.

The sandbox is what keeps a submission from the reference answers (``grader.student_side``):
the course package's reference answers are tripwires there, the libraries that implement an
assignment are absent, the listed torch operations are refused where they run, and the
reference checkpoint is never copied in. What a student's code does at run time (hidden
imports, ``exec``, monkeypatches, writes into torch) is therefore judged by its behaviour,
not read here: a reading of code can be neither complete nor precise, and once flagged
honest students (``warnings``, ``matplotlib``, ``getattr(self, f"W_{n}")``, issue 63).

What is left for the text: an answer cell that *names* a reference answer, where a reader
can see it, whether or not the run reached it (a branch the grader's inputs never take):

- a ``course_utils`` name that the sandbox replaces by a tripwire (``references``: the names
  the lecturer's solutions define and the objects ``checks.py`` compares with, unless a
  read-only cell hands them out), imported or reached through an imported module;
- another library's reference answer listed in the source notebook's metadata
  (``course.reference_answers``: ``torch.nn.MultiheadAttention``; a library such as
  ``tokenizers``, all of it; a ``torch.Tensor`` method such as ``torch.Tensor.unfold``, every
  ``x.unfold(...)``), compared as the object it resolves to (an alias is the same answer).

A finding caps the question whose answer cell holds it (its test cells score 0) and is listed
for the lecturer (``grades.csv``'s review column); no other question is touched. Nothing of
the student's runs here: names are resolved by importing only public modules of the packages
the grader itself uses (``IMPORTABLE``).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
import types
from dataclasses import dataclass, field

from grader.cells import parse_python

PACKAGE = "course_utils"
#: the packages whose public modules may be imported to see what a name stands for (the grader
#: imports them itself); any other name resolves to nothing (reading code must not run it: issue
#: 63's `import certifi.__main__` once ran that module in the grader)
IMPORTABLE = {PACKAGE, "torch", "tokenizers", "numpy", "collections", "math"}


@dataclass
class Finding:
    """A reference answer named in an answer cell."""
    kind: str     # 'reference'
    cell: str     # grade_id of the answer cell
    what: str     # e.g. 'course_utils.attention.scaled_dot_product_attention'
    at: int = -1  # index of the top-level statement of the cell that holds it

    def reason(self) -> str:
        return f"uses {self.what}, the reference answer (answer cell '{self.cell}')"


@dataclass
class Report:
    """The findings of one submission and the questions (test grade_ids) they cap."""
    findings: list[Finding] = field(default_factory=list)
    zeroed: dict[str, str] = field(default_factory=dict)  # test grade_id -> reason

    @property
    def flags(self) -> list[str]:
        return ["reference import"] if self.findings else []


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
        return parse_python(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def bound_names(stmt: ast.stmt) -> set[str]:
    """Global names a top-level statement binds (def, class, import, assignment targets)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names if a.name != "*"}
    names = set()
    scoped = {id(n) for f in ast.walk(stmt) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                              ast.Lambda, ast.ClassDef))
              for n in ast.walk(f) if n is not f}
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)) and id(node) not in scoped:
            names.add(node.id)
        elif isinstance(node, ast.Global):
            names.update(node.names)
    return names


def loaded_names(tree: ast.AST) -> set[str]:
    """Every name the code reads (globals and locals alike: an over-approximation)."""
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _dotted(node) -> list[str] | None:
    """``a.b.c`` as ['a', 'b', 'c'], or None for anything that is not a plain chain."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id] + parts[::-1]
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


# --------------------------------------------------------------------------------------
# Names -> the objects they stand for
# --------------------------------------------------------------------------------------

def resolve(qualname: str, trusted: bool = False):
    """The object ``qualname`` names (module, then attributes), or None: only public modules of
    ``IMPORTABLE`` are imported (``trusted``: a name of the lecturer's, private parts allowed)."""
    parts = qualname.split(".")
    if parts[0] not in IMPORTABLE or (not trusted and any(p.startswith("_") for p in parts)):
        return None
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except Exception:  # noqa: BLE001  (not a module: an attribute of the one before)
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr, None)
            if obj is None:
                return None
        return obj
    return None


def _findable(module: str) -> bool:
    try:
        return module in sys.modules or importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _is_module(obj) -> bool:
    return isinstance(obj, types.ModuleType)


def _key(obj) -> int:
    """A reference answer by its function: a classmethod reached through its class is the same."""
    return id(obj.__func__) if isinstance(obj, types.MethodType) else id(obj)


class Names:
    """What each global name stands for (an imported module or object), as the cells run in order."""

    def __init__(self, other: "Names | None" = None):
        self.qualname: dict[str, str] = {**other.qualname} if other else {}

    def update(self, tree) -> None:
        """Follow the top-level statements of ``tree`` (a cell or one statement): imports bind
        qualified names, any other binding makes the name something else."""
        for stmt in tree.body if isinstance(tree, ast.Module) else [tree]:
            imported = imports_of(stmt)
            for name in bound_names(stmt) - set(imported):
                self.qualname.pop(name, None)
            self.qualname.update(imported)

    def qualify(self, parts: list[str], local: set[str] = frozenset()) -> str | None:
        """The qualified name of the chain ``parts`` if its root is an imported global."""
        if parts[0] in local or parts[0] not in self.qualname:
            return None
        return ".".join([self.qualname[parts[0]]] + parts[1:])


class Rules:
    """The reference answers of one assignment: ``references`` (``module.name`` in the course
    package, the sandbox's tripwires) and the other libraries' answers listed in its source's
    metadata (``reference_answers``)."""

    def __init__(self, reference_answers=(), references=()):
        self.forbidden: dict[int, str] = {}        # id -> qualified name
        self.forbidden_modules: list[str] = []     # whole libraries (tokenizers) or modules
        self.forbidden_methods: dict[str, str] = {}  # name -> qualified name, of listed torch.Tensor methods
        for qual in [*reference_answers, *sorted(references)]:
            obj = resolve(qual, trusted=True)  # the lecturer's names
            if obj is None and "." not in qual and _findable(qual):
                self.forbidden_modules.append(qual)  # an installed library, all of it: found, not imported
                continue
            if obj is None:
                raise ValueError(f"reference answer {qual!r} (notebook metadata course.reference_answers, "
                                 "or a course name the solutions define) does not name an importable object")
            if _is_module(obj):
                self.forbidden_modules.append(qual)
            else:
                self.forbidden[_key(obj)] = qual
                if qual.startswith("torch.Tensor.") and qual.count(".") == 2:
                    self.forbidden_methods[qual.rsplit(".", 1)[1]] = qual

    def verdict(self, qual: str) -> str | None:
        """'reference' when ``qual`` names a reference answer, else None."""
        if any(qual == m or qual.startswith(m + ".") for m in self.forbidden_modules):
            return "reference"
        obj = resolve(qual)
        if obj is None or _is_module(obj):
            return None
        return "reference" if _key(obj) in self.forbidden else None


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
    return names - declared


def _walk_scoped(node, local=frozenset()):
    """Every node under ``node`` with the names that are local where it stands."""
    todo = [(node, local)]
    while todo:
        node, local = todo.pop()
        yield node, local
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inner = local | _local_names(node) if not isinstance(node, ast.Lambda) else \
                local | {a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs}
            todo += [(child, inner) for child in ast.iter_child_nodes(node)]
        else:
            todo += [(child, local) for child in ast.iter_child_nodes(node)]


def check_cell(tree, gid: str, names: Names, rules: Rules) -> list[Finding]:
    """The findings of one answer cell; ``names``: what the globals stand for before it runs
    (updated with its imports)."""
    found = []
    for k, stmt in enumerate(tree.body):
        def add(what):
            if not any(f.what == what and f.at == k for f in found):
                found.append(Finding("reference", gid, what, k))

        scope = Names(names)
        scope.update(stmt)
        for node, local in _walk_scoped(stmt):
            for qual in _import_bindings(node).values():
                if rules.verdict(qual):
                    add(qual)
            if isinstance(node, ast.ImportFrom) and node.module and any(a.name == "*" for a in node.names) and (
                    rules.verdict(node.module) or (node.module.split(".")[0] == PACKAGE and any(
                        q.startswith(node.module + ".") for q in rules.forbidden.values()))):
                add(f"{node.module}.*")  # every name of a course module that holds a reference answer
            if isinstance(node, (ast.Attribute, ast.Name)) and isinstance(node.ctx, ast.Load):
                parts = _dotted(node)
                qual = scope.qualify(parts, local) if parts else None
                if qual and rules.verdict(qual):
                    add(qual)
                elif isinstance(node, ast.Attribute) and qual is None and node.attr in rules.forbidden_methods:
                    add(rules.forbidden_methods[node.attr])  # a tensor's method: x.unfold(...)
        names.update(stmt)
    return found


def check(cells, rules: Rules, *, is_answer, is_test, grade_id, answer_names: set[str] = frozenset()) -> Report:
    """Check every answer cell of ``cells`` (the notebook the grader will run, in order); a
    finding caps the test cells of its own question (those after its answer cell, up to the
    next answer cell). ``answer_names``: kept for the callers (the names the solutions bind)."""
    names, report = Names(), Report()
    current = None  # the answer cell the test cells that follow belong to
    by_cell: dict[str, list[Finding]] = {}
    for cell in cells:
        if cell.cell_type != "code":
            continue
        tree = parse(cell.source)
        if is_answer(cell):
            current = grade_id(cell)
            if tree is None:
                continue
            try:
                found = check_cell(tree, current, names, rules)
            except RecursionError:  # too deep to read: it runs, judged by what it does
                found = []
            by_cell[current] = found
            report.findings += found
        elif tree is not None:
            names.update(tree)
            if is_test(cell) and by_cell.get(current):
                report.zeroed[grade_id(cell)] = by_cell[current][0].reason()
    return report
