"""What a submission finds in its sandbox instead of the references: the course package with
the assignment's reference answers taken out, the libraries that implement the assignment
absent, and the torch operations that would do its work refused where they run.

- ``course_utils`` is a copy in which every top-level function or class that answers one of
  the assignment's questions (a name the lecturer's solutions define, or an object its
  ``checks.py`` compares the student's answers with) is a *tripwire*: a function, or a class
  that cannot be made or subclassed, which raises ``ReferenceAnswerAbsent`` naming itself.
  The names the read-only cells hand out (``train``, the configs, ``EncoderLayer`` in a4) stay
  as they are; its compiled files are made anew, so the originals' bytes are nowhere in the
  sandbox. The copy is bound over the package's folder (``grader.sandbox.command``'s ``replace``).
- A package listed in ``course.reference_answers`` (``tokenizers``, ``transformers``) is an
  empty folder in the sandbox (``absent``), unless a read-only cell imports it itself.
- A course class derived from a reference class is a tripwire too (it inherits the answer).
- Torch functions and operators listed there are refused while the grader's calls run
  (``forbidden``: names for a ``TorchFunctionMode``, aten operators for a ``TorchDispatchMode``,
  so that ``scaled_dot_product_attention`` reached by any path, a module's fast path included,
  raises).

Everything here runs in the grader's process on the course's own files; nothing of a submission.
"""
from __future__ import annotations

import ast
import compileall
import shutil
import tempfile
import threading
from pathlib import Path

from grader.cells import ROOT, is_answer_cell, is_test_cell, parse_python

PACKAGE = "course_utils"

#: the aten operators that carry out a torch name an assignment lists as a reference answer
OPERATORS = {
    "torch.nn.functional.scaled_dot_product_attention": [
        "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_fused_attention_overrideable"],
    "torch.nn.MultiheadAttention": ["_native_multi_head_attention"],
    "torch.nn.functional.multi_head_attention_forward": ["_native_multi_head_attention"],
    "torch.nn.Transformer": ["_transformer_encoder_layer_fwd", "_native_multi_head_attention"],
    "torch.nn.TransformerEncoder": ["_transformer_encoder_layer_fwd", "_native_multi_head_attention"],
    "torch.nn.TransformerEncoderLayer": ["_transformer_encoder_layer_fwd", "_native_multi_head_attention"],
    "torch.nn.TransformerDecoder": ["_native_multi_head_attention"],
    "torch.nn.TransformerDecoderLayer": ["_native_multi_head_attention"],
    "torch.nn.functional.unfold": ["im2col"], "torch.nn.Unfold": ["im2col"], "torch._C._nn.im2col": ["im2col"],
    "torch.nn.functional.fold": ["col2im"], "torch.nn.Fold": ["col2im"], "torch._C._nn.col2im": ["col2im"],
    "torch.Tensor.unfold": ["unfold"],
}


#: torch functions that do the work of a listed one under another name (reached as
#: ``torch.ops.aten.<name>``, which no other path to the listed function passes through)
SAME_WORK = {"scaled_dot_product_attention": ["_scaled_dot_product_attention_math",
                                              "_scaled_dot_product_attention_math_for_mps"]}


def listed(source) -> list[str]:
    """``course.reference_answers`` of a source notebook."""
    value = source.metadata.get("course", {}).get("reference_answers", [])
    return [str(x) for x in value] if isinstance(value, list) else []


def _read_only_trees(source):
    """The parsed code of the source notebook's read-only cells (not the answers, not the tests)."""
    for cell in source.cells:
        if cell.cell_type != "code" or is_answer_cell(cell) or is_test_cell(cell):
            continue
        try:
            yield parse_python(cell.source)
        except SyntaxError:
            continue


def absent_packages(source) -> list[str]:
    """The packages (whole libraries) listed as reference answers, but for those a read-only cell
    imports itself (a4's data cell builds its tokenizer with ``transformers``: that package stays,
    and only the reading of the answer cells keeps an answer from it)."""
    used = set()
    for tree in _read_only_trees(source):
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                used |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                used.add(node.module.split(".")[0])
    return sorted({name for name in listed(source) if "." not in name} - used)


def forbidden(source) -> dict:
    """{"functions": names a TorchFunctionMode refuses, "operators": aten operators a
    TorchDispatchMode refuses} for the torch names listed as reference answers."""
    functions = {name.rsplit(".", 1)[1] for name in listed(source)
                 if name.startswith("torch.") and name.rsplit(".", 1)[1][:1].islower()}
    functions |= {other for name in functions for other in SAME_WORK.get(name, [])}
    operators = {op for name in listed(source) for op in OPERATORS.get(name, [])}
    return {"functions": sorted(functions), "operators": sorted(operators)}


def _handed_out(source) -> set[str]:
    """Names of ``course_utils`` that the read-only cells (not the tests) import."""
    names = set()
    for tree in _read_only_trees(source):
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == PACKAGE:
                names |= {a.name for a in node.names}
    return names


def _solution_names(source) -> set[str]:
    """The top-level names the lecturer's solutions define."""
    names = set()
    for cell in source.cells:
        if cell.cell_type != "code" or not is_answer_cell(cell):
            continue
        try:
            tree = parse_python(cell.source)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def compared_names(questions: dict, extra=()) -> set[str]:
    """``module.name`` of the course objects that the questions of a checks.py compare the
    student's answers with (the values of each ``reference()``, the course classes a reference
    class there derives from) and of ``extra`` (its ``REFERENCE_CODE``)."""
    found = set(extra)
    for question in questions.values():
        for value in question.reference().values():
            for obj in (value.__mro__[:-1] if isinstance(value, type) else (value,)):
                module, name = getattr(obj, "__module__", "") or "", getattr(obj, "__qualname__", "")
                if module.split(".")[0] == PACKAGE and name and "." not in name:
                    found.add(f"{module}.{name}")
    return found


def _modules(folder: Path) -> dict[str, Path]:
    """The files of the package in ``folder`` by their module names inside it (``attention``,
    ``__init__``; in a subpackage ``data.vocab``, and ``data`` for its ``__init__``)."""
    found = {}
    for path in sorted(folder.rglob("*.py")):
        parts = path.relative_to(folder).with_suffix("").parts
        found[".".join(parts[:-1] if len(parts) > 1 and parts[-1] == "__init__" else parts)] = path
    return found


def reference_names(source, compared: set[str] = frozenset()) -> set[str]:
    """The names (``module.name``) in ``course_utils`` that answer the assignment's questions:
    a top-level definition named as a solution defines a name, or ``compared`` (the
    ``module.name`` of the objects its checks.py compares with), unless a read-only cell hands
    it out."""
    wanted, handed = _solution_names(source), _handed_out(source)
    found = set(compared)
    trees = {stem: parse_python(path.read_text()) for stem, path in _modules(ROOT / PACKAGE).items()}
    for stem, tree in trees.items():
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in wanted:
                found.add(f"{PACKAGE}.{stem}.{node.name}")
    # a course class derived from a reference class is one too (it inherits the answer; and a
    # tripwire cannot be subclassed, so the module that defines it could not be imported)
    grown = True
    while grown:
        bare = {n.rsplit(".", 1)[1] for n in found}
        grown = False
        for stem, tree in trees.items():
            for node in tree.body:
                name = f"{PACKAGE}.{stem}.{getattr(node, 'name', '')}"
                if isinstance(node, ast.ClassDef) and name not in found and node.name not in handed and any(
                        (b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else None) in bare
                        for b in node.bases):
                    found.add(name)
                    grown = True
    return {n for n in found if n.rsplit(".", 1)[1] not in handed}


def _tripwire(node, module: str, assignment: str) -> str:
    what = f"{module}.{node.name}"
    message = repr(f"{what} is a reference answer of {assignment}: it is not available while grading")
    if isinstance(node, ast.ClassDef):
        return (f"class {node.name}:\n"
                f"    def __init_subclass__(cls, **kwargs):\n        raise ReferenceAnswerAbsent({message})\n"
                f"    def __new__(cls, *args, **kwargs):\n        raise ReferenceAnswerAbsent({message})\n")
    return f"def {node.name}(*args, **kwargs):\n    raise ReferenceAnswerAbsent({message})\n"


def strip_module(text: str, module: str, names: set[str], assignment: str) -> str:
    """``text`` (a module of the package) with the top-level definitions ``names`` replaced by
    tripwires (their decorators, docstrings and bodies gone)."""
    tree = parse_python(text)
    lines = text.splitlines(keepends=True)
    cuts = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in names:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            cuts.append((first - 1, node.end_lineno, _tripwire(node, module, assignment)))
    if not cuts:
        return text
    for start, end, stub in sorted(cuts, reverse=True):
        lines[start:end] = [stub]
    header = ("\n\nclass ReferenceAnswerAbsent(RuntimeError):\n"
              "    \"\"\"A reference answer was called while grading (a tripwire of grader.student_side).\"\"\"\n\n")
    # after the module's docstring and its `from __future__` imports, which must stay first
    after = 0
    for node in tree.body:
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)) \
                or (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
            after = node.end_lineno
        else:
            break
    shift = sum(1 for start, _, _ in cuts if start < after)  # never: the docstring comes first
    assert shift == 0
    return "".join(lines[:after]) + header + "".join(lines[after:])


#: what the course's own code calls instead of torch's fused attention where the assignment refuses
#: it (``fused_attention`` written out: the same output up to float rounding, so that a layer the
#: assignment hands out, a6's ``EncoderLayer``, needs no exception to the refusal)
WRITTEN_OUT = {("attention", "fused_attention"): '''def fused_attention(q, k, v, mask=None, dropout_p: float = 0.0) -> torch.Tensor:
    """``scaled_dot_product_attention``'s output (written out while grading: torch's fused kernel
    is refused in this assignment's sandbox)."""
    _check_qkv(q, k, v, mask)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # a query with no key: a zero output
    if dropout_p > 0.0:
        weights = nn.functional.dropout(weights, dropout_p)
    return weights @ v
'''}


def written_out(text: str, names: dict[str, str]) -> str:
    """``text`` (a module of the package) with the top-level functions ``names`` (name -> code)
    replaced by that code."""
    tree = parse_python(text)
    lines = text.splitlines(keepends=True)
    cuts = [(min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1, node.end_lineno, names[node.name])
            for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names]
    for start, end, code in sorted(cuts, reverse=True):
        lines[start:end] = [code]
    return "".join(lines)


_built: dict[str, Path] = {}
_lock = threading.Lock()


def student_package(name: str, source, compared: set[str] = frozenset()) -> Path:
    """A folder holding the course package as a submission of ``name`` finds it (built once
    per process, in a temporary folder that lives as long as the process)."""
    with _lock:
        if name not in _built:
            out = Path(tempfile.mkdtemp(prefix=f"grader-{name}-course_utils-")) / PACKAGE
            strip = reference_names(source, compared)
            refused = forbidden(source)["functions"]
            shutil.copytree(ROOT / PACKAGE, out, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            for stem, path in _modules(out).items():
                module = f"{PACKAGE}.{stem}"
                names = {n.rsplit(".", 1)[1] for n in strip if n.rsplit(".", 1)[0] == module}
                if names:
                    path.write_text(strip_module(path.read_text(), module, names, name))
                own = {fn: code for (written, fn), code in WRITTEN_OUT.items()
                       if written == stem and fn not in names and "scaled_dot_product_attention" in refused}
                if own:
                    path.write_text(written_out(path.read_text(), own))
            compileall.compile_dir(str(out), quiet=1)
            for p in [out.parent, *out.parent.rglob("*")]:
                p.chmod(0o755 if p.is_dir() else 0o644)
            _built[name] = out
        return _built[name]
