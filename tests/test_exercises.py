"""Every exercise runs as written against the package.

The exercises at the end of each notebook name package functions, their keyword arguments
and options (`BT.pretraining_batches(..., mlm_prob=0.4)`, `positional="none"`); some carry a
short starter in a fenced ```python block. Two checks:

1. every code span of an Exercises section that calls or names something the notebook
   imports (or a public name of the course_utils modules it imports) resolves, and every
   keyword it passes is a parameter of that callable; a bare ``name=value`` option must be a
   parameter or field of some callable the notebook can reach;
2. every fenced starter runs: in a namespace with the notebook's own names at small size
   (the builders below; training capped at two steps by ``COURSE_SMOKE_STEPS``), and every
   name it uses without binding it is one the notebook binds, so it runs after the
   notebook's cells too.
"""

import ast
import dataclasses
import functools
import importlib
import inspect
import json
import re
import textwrap
from pathlib import Path

import pytest
from grader.answer_checks import imports_of
from course_utils.files import chapters

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = chapters()


# -- reading a notebook --------------------------------------------------------------------

def _cells(path):
    return [(c["cell_type"], "".join(c["source"])) for c in json.loads(path.read_text())["cells"]]


def exercises_markdown(path) -> str:
    """The Exercises section: from '## Exercises' to the next level-2 heading."""
    text = "\n".join(source for kind, source in _cells(path) if kind == "markdown")
    match = re.search(r"^## Exercises\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"{path.name}: no '## Exercises' section"
    return match.group(1)


def fenced_blocks(markdown: str) -> list[str]:
    return [textwrap.dedent(m.group(1)) for m in re.finditer(r"```python\n(.*?)```", markdown, re.S)]


def inline_spans(markdown: str) -> list[str]:
    without_blocks = re.sub(r"```.*?```", "", markdown, flags=re.S)
    return re.findall(r"`([^`\n]+)`", without_blocks)


def notebook_code(path) -> str:
    """The notebook's code cells as one module (IPython magics dropped)."""
    lines = []
    for kind, source in _cells(path):
        if kind == "code":
            lines += [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    return "\n".join(lines)


@functools.lru_cache(maxsize=None)
def notebook_tree(path) -> ast.Module:
    """The notebook's code cells, parsed once per test session."""
    return ast.parse(notebook_code(path))


def notebook_bindings(path) -> tuple[dict[str, str], set[str]]:
    """(import alias -> dotted module or object path, every other name the notebook binds)."""
    tree = notebook_tree(path)
    bound = {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    bound |= {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}
    return imports_of(tree), bound  # the grader's reading of import statements


def _import_path(dotted: str):
    """A module, or an attribute of one, from a dotted path."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            obj = getattr(obj, part)
        return obj
    raise ImportError(dotted)


def course_modules(imports: dict[str, str]) -> list:
    """The course_utils modules a notebook imports, or imports names from."""
    modules = {"course_utils": importlib.import_module("course_utils")}
    for dotted in imports.values():
        if dotted.split(".")[0] != "course_utils":
            continue
        obj = _import_path(dotted)
        module = obj if inspect.ismodule(obj) else inspect.getmodule(obj)
        if module is not None and module.__name__.startswith("course_utils"):
            modules[module.__name__] = module
    return [modules[name] for name in sorted(modules)]


# -- check 1: the code spans -------------------------------------------------------------------

class SpanChecker:
    """Resolves the names of a notebook's exercise spans and checks their keywords."""

    def __init__(self, path):
        self.imports, self.bound = notebook_bindings(path)
        self.modules = course_modules(self.imports)
        self.notebook_functions = {}
        for node in ast.walk(notebook_tree(path)):
            if isinstance(node, ast.FunctionDef):
                self.notebook_functions[node.name] = {a.arg for a in node.args.args + node.args.kwonlyargs}

    def resolve(self, node):
        """The object an ast Name/Attribute chain denotes, or None if it is the notebook's own
        variable (not checkable here). Raises AttributeError for a missing attribute."""
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return None if base is None else getattr(base, node.attr)
        if isinstance(node, ast.Name):
            if node.id in self.imports:
                return _import_path(self.imports[node.id])
            if node.id in self.bound:
                return None
            for module in self.modules:
                if hasattr(module, node.id) and not node.id.startswith("_"):
                    return getattr(module, node.id)
            return None
        return None

    def parameters(self, obj) -> tuple[set[str], bool]:
        """(keyword names ``obj`` accepts, whether it takes **kwargs)."""
        try:
            signature = inspect.signature(obj)
        except (TypeError, ValueError):
            return set(), True
        names = {p.name for p in signature.parameters.values()
                 if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        return names, any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())

    def reachable_options(self) -> set[str]:
        """Every parameter or dataclass field of the public callables the notebook reaches."""
        options = set()
        for params in self.notebook_functions.values():
            options |= params
        for module in self.modules:
            for name, obj in vars(module).items():
                if name.startswith("_") or not getattr(obj, "__module__", "").startswith("course_utils"):
                    continue  # the course's own callables only, not what its modules import
                if dataclasses.is_dataclass(obj):
                    options |= {f.name for f in dataclasses.fields(obj)}
                if inspect.isclass(obj):
                    for _, method in inspect.getmembers(obj, inspect.isfunction):
                        options |= self.parameters(method)[0]
                if callable(obj):
                    options |= self.parameters(obj)[0]
        return options

    def check(self, span: str) -> tuple[int, list[str]]:
        """(number of references checked, problems) for one inline code span."""
        try:
            tree = ast.parse(span, mode="eval")
        except SyntaxError:
            try:  # a bare option list such as `bidirectional=False, hidden_size=128`
                tree = ast.parse(f"_options({span})", mode="eval")
            except SyntaxError:
                return 0, []
        checked, problems = 0, []
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_options":
                options = self.reachable_options()
                for kw in node.keywords:
                    checked += 1
                    if kw.arg not in options:
                        problems.append(f"`{span}`: no function or config the notebook reaches has "
                                        f"a parameter {kw.arg!r}")
            elif isinstance(node, ast.Call):
                try:
                    target = self.resolve(node.func)
                except AttributeError as error:
                    problems.append(f"`{span}`: {error}")
                    continue
                if target is None and isinstance(node.func, ast.Name) and node.func.id in self.notebook_functions:
                    names, takes_any = self.notebook_functions[node.func.id], False
                elif target is None or not callable(target):
                    continue
                else:
                    names, takes_any = self.parameters(target)
                checked += 1
                for kw in node.keywords:
                    if kw.arg is not None and kw.arg not in names and not takes_any:
                        problems.append(f"`{span}`: {ast.unparse(node.func)} has no parameter "
                                        f"{kw.arg!r} (it takes {sorted(names)})")
            elif isinstance(node, ast.Attribute):
                try:
                    if self.resolve(node) is not None:
                        checked += 1
                except AttributeError as error:
                    problems.append(f"`{span}`: {error}")
        return checked, problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_exercise_code_spans_match_the_package(path):
    checker = SpanChecker(path)
    markdown = exercises_markdown(path)
    results = [checker.check(span) for span in inline_spans(markdown)]
    problems = [p for _, found in results for p in found]
    assert not problems, f"{path.name}, Exercises:\n" + "\n".join(problems)
    if re.search(r"`[\w.]+\(", markdown):  # the section names package calls: some were checked
        assert sum(n for n, _ in results) > 0


def test_the_span_check_catches_what_the_issue_found():
    """The mistakes of 05's old exercise 7 and of a misspelt option fail the check."""
    checker = SpanChecker(ROOT / "notebooks" / "05_bert.ipynb")
    assert checker.check("B.BertEncoder(cfg, causal=True)")[1]          # causal belongs to forward
    assert not checker.check("B.BertEncoder(cfg)")[1]
    assert checker.check("BT.pretrain(model, tokenizer, pairs, recipe, mlm_prob=0.4)")[1]
    assert not checker.check("BT.pretraining_batches(tokenizer, pairs, 8, 64, mlm_prob=0.4)")[1]
    assert checker.check("minilm_frozen_layer=0")[1]                    # misspelt option
    assert not checker.check("minilm_frozen_layers=0")[1]
    assert checker.check("B.no_such_function(1)")[1]


# -- check 2: the fenced starters -------------------------------------------------------------

def _notebook_function(path, name: str, namespace: dict) -> None:
    """Define the notebook's own function ``name`` (its source, as written) in ``namespace``."""
    for node in notebook_tree(path).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            exec(compile(ast.Module([node], []), f"{path.name}:{name}", "exec"), namespace)
            return
    raise AssertionError(f"{path.name} defines no function {name}")


def _context_04(path, device):
    import torch
    from course_utils import data, recipes, transformer as T
    from course_utils.data import TranslationData
    from course_utils.decoding import score_translations
    from course_utils.translation_training import fit_transformer
    splits = data.load_synthetic(num_train=200, num_valid=20, num_test=20, seed=0, cache=False)
    return dict(torch=torch, T=T, fit_transformer=fit_transformer, recipe=recipes.TRANSFORMER_FAST, splits=splits,
                train_data=TranslationData.build(splits.train), score_translations=score_translations,
                device=device)


def _context_05(path, device):
    import copy
    import time

    import numpy as np
    import torch
    from sklearn.metrics import f1_score

    from course_utils import bert as B, bert_training as BT, data, novels, recipes
    from course_utils.training import train
    from course_utils.schedules import warmup_scheduler
    recipe = dataclasses.replace(recipes.BERT_FAST, vocab_size=300, batch_size=4,
                                 max_len=32, fine_tune_batch=4, task_max_len=24)
    everything = data.load_english_text()
    book_names = sorted({p.book for p in everything})
    paragraphs = [p for book in book_names for p in [q for q in everything if q.book == book][:60]]
    documents = novels.chapter_documents(paragraphs)
    tokenizer = BT.train_wordpiece_tokenizer((p.text for p in paragraphs), recipe.vocab_size)
    passages = novels.book_passages(paragraphs, 2)
    tensors = BT.encode_classification(tokenizer, [t for t, _ in passages], [y for _, y in passages],
                                      recipe.task_max_len)
    namespace = dict(
        B=B, BT=BT, novels=novels, torch=torch, np=np, copy=copy, time=time, train=train, warmup_scheduler=warmup_scheduler,
        device=device, recipe=recipe, tokenizer=tokenizer,
        pairs=novels.nsp_pairs(documents, 16, seed=0), heldout_pairs=novels.nsp_pairs(documents, 8, seed=1),
        our_data={"books": (tensors, tensors)}, book_names=book_names,
        accuracy=lambda y, p: float((y == p).mean()), name_f1=lambda y, p: float(f1_score(y, p)))
    defined = {node.name for node in notebook_tree(path).body if isinstance(node, ast.FunctionDef)}
    for name in ("fine_tune", "small_encoder"):     # part 2's (05b_bert_finetuning)
        if name in defined:
            _notebook_function(path, name, namespace)
    return namespace


def _context_06(path, device):
    from collections import Counter
    from course_utils import bpe, data, recipes
    paragraphs = data.load_english_text()
    return dict(bpe=bpe, Counter=Counter, recipe=dataclasses.replace(recipes.BPE_FAST, wordpiece_words=300,
                                                                     wordpiece_merges=40),
                train_texts=[p.text for p in paragraphs if p.book != "Persuasion"][:300],
                heldout_texts=[p.text for p in paragraphs if p.book == "Persuasion"][:100])


#: notebook stem -> builder of the names its starters use (small sizes; ``device``: the run's,
#: which the notebooks get from setup())
CONTEXTS = {"04_transformer": _context_04, "05_bert": _context_05, "05b_bert_finetuning": _context_05,
            "06_bpe": _context_06}

STARTERS = [(path, i) for path in NOTEBOOKS for i, _ in enumerate(fenced_blocks(exercises_markdown(path)))]


def test_starters_exist_where_the_issue_asked():
    """05's pre-training variants and a GPT from BERT's pieces (05_bert's exercises 1 and 4) and
    MLM without NSP, then fine-tuned (05b_bert_finetuning's exercise 1) have starters."""
    found = {path.stem: len(fenced_blocks(exercises_markdown(path))) for path in NOTEBOOKS}
    assert found["05_bert"] >= 2 and found["05b_bert_finetuning"] >= 1
    assert all(stem in CONTEXTS for stem, count in found.items() if count)


def _free_names(code: str) -> set[str]:
    tree = ast.parse(code)
    stored = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    stored |= {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    stored |= {a.arg for n in ast.walk(tree) if isinstance(n, ast.arguments)
               for a in n.args + n.kwonlyargs + n.posonlyargs}
    stored |= {(a.asname or a.name).split(".")[0] for n in ast.walk(tree)
               if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    import builtins
    return used - stored - set(dir(builtins))


@pytest.mark.parametrize("path,index", STARTERS, ids=lambda v: v.stem if isinstance(v, Path) else str(v))
def test_exercise_starter_runs(path, index, monkeypatch, device):
    code = fenced_blocks(exercises_markdown(path))[index]
    imports, bound = notebook_bindings(path)
    free = _free_names(code)
    missing = free - set(imports) - bound
    assert not missing, f"{path.name} starter {index + 1} uses names the notebook never binds: {sorted(missing)}"
    monkeypatch.setenv("COURSE_SMOKE_STEPS", "2")   # training.train stops after two steps
    monkeypatch.setenv("COURSE_SMOKE_EVAL", "16")
    namespace = CONTEXTS[path.stem](path, device)
    assert free <= set(namespace), f"the test's context lacks {sorted(free - set(namespace))}"
    exec(compile(code, f"{path.name}: exercise starter {index + 1}", "exec"), namespace)
