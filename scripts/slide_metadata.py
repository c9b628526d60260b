"""Set each cell's slide type (`metadata.slideshow.slide_type`) by rules, so that every
notebook presents well as RISE slides in JupyterLab and as an exported deck (`make slides`).

Usage: python scripts/slide_metadata.py notebooks/NN_x.ipynb [...] [--check]

Only metadata changes (sources and outputs are untouched), and running it twice changes
nothing. `--check` writes nothing and exits 1 when a notebook's slide types differ from the
rules (tests/test_slides.py runs it). A hand-made choice can be kept by setting
`metadata.slideshow.keep = true` on that cell.

The rules (one idea a slide, figures large):
- the title cell and every `##` heading start a slide; `###` headings start a sub-slide;
- the set-up cell (`setup()`), every code cell before the first `##` heading (the set-up that
  follows the title: recipes, checks of the profile) and cells that only assert or print
  checks are skipped in the slideshow (they run, they are just not shown: run all cells
  before presenting);
- a figure gets a sub-slide of its own when the slide it would join is already half full;
- a text cell that follows code starts a sub-slide when the slide is already full;
- everything else continues the current slide.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path

#: rough heights in lines of a slide (1280x720, as the decks of scripts/export_slides.py)
FULL, HALF, FIGURE, MAX_TEXT_OUTPUT = 22, 9, 16, 12
RISE = {"scroll": True, "transition": "none", "theme": "white"}  # white: no web fonts


def _source(cell) -> str:
    src = cell["source"]
    return "".join(src) if isinstance(src, list) else src


def _has_figure(cell) -> bool:
    return any(k.startswith("image/") for o in cell.get("outputs", []) for k in o.get("data", {}))


def _is_check(cell) -> bool:
    """A code cell whose statements are all asserts or print calls (and no figure)."""
    try:
        body = ast.parse(_source(cell)).body
    except SyntaxError:
        return False
    def is_print(node):
        return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
                and getattr(node.value.func, "id", None) == "print")
    return bool(body) and any(isinstance(n, ast.Assert) for n in body) and \
        all(isinstance(n, ast.Assert) or is_print(n) for n in body) and not _has_figure(cell)


def _height(cell) -> int:
    lines = _source(cell).count("\n") + 1
    if cell["cell_type"] != "code":
        return lines + 1
    text = sum(min(MAX_TEXT_OUTPUT, "".join(o.get("text", "")).count("\n") + 1)
               for o in cell.get("outputs", []) if o.get("output_type") == "stream")
    return lines + text + (FIGURE if _has_figure(cell) else 0)


def slide_types(nb: dict) -> list[str]:
    """The slide type of every cell of notebook ``nb`` (a dict as in the .ipynb JSON)."""
    types, used, previous, seen_setup, on_title = [], 0, None, False, True
    for i, cell in enumerate(nb["cells"]):
        src = _source(cell).lstrip()
        kind = "-"
        if cell["cell_type"] == "markdown":
            if i > 0 and src.startswith("## "):
                on_title = False
            if i == 0 or src.startswith(("# ", "## ")):
                kind = "slide"
            elif src.startswith("### "):
                kind = "subslide"
            elif previous == "code" and used + _height(cell) > FULL:
                kind = "subslide"
        elif cell["cell_type"] == "code":
            if not seen_setup and "setup(" in src:
                kind, seen_setup = "skip", True
            elif on_title:  # set-up between the title and the first section
                kind = "skip"
            elif _is_check(cell):
                kind = "skip"
            elif _has_figure(cell) and used > HALF:
                kind = "subslide"
        keep = cell.get("metadata", {}).get("slideshow", {})
        if keep.get("keep") and keep.get("slide_type"):
            kind = keep["slide_type"]
        types.append(kind)
        if kind in ("slide", "subslide"):
            used = 0
        if kind != "skip":
            used += _height(cell)
            previous = cell["cell_type"]
    return types


def apply(nb: dict) -> bool:
    """Set the slide types (and RISE's notebook options) in ``nb``; True if anything changed."""
    changed = False
    for cell, kind in zip(nb["cells"], slide_types(nb)):
        slideshow = cell.setdefault("metadata", {}).setdefault("slideshow", {})
        if slideshow.get("slide_type") != kind:
            slideshow["slide_type"] = kind
            changed = True
    rise = nb.setdefault("metadata", {}).setdefault("rise", {})
    for key, value in RISE.items():
        if rise.get(key) != value:
            rise[key] = value
            changed = True
    return changed


#: comment lines for the test tools, never for a reader (nbval's markers)
MARKER = re.compile(r"^\s*#\s*NBVAL_\w+.*$")


def _plumbing(node: ast.stmt) -> bool:
    """A statement that checks or files results rather than teaches: an ``assert``, a
    ``save_results(...)`` call (bare or assigned), a legend removed by hand, or a loop, ``if`` or
    ``with`` that holds nothing else."""
    if isinstance(node, ast.Assert):
        return True
    if isinstance(node, (ast.For, ast.While, ast.If, ast.With)):   # a loop of asserts is a check too
        inner = node.body + getattr(node, "orelse", [])
        return bool(inner) and all(_plumbing(n) for n in inner)
    call = node.value if isinstance(node, (ast.Expr, ast.Assign)) else None
    if not isinstance(call, ast.Call):
        return False
    name = ast.unparse(call.func)
    return name.split(".")[-1] == "save_results" or name.endswith("get_legend().remove")


def shown_source(source: str) -> str:
    """What a slide or a web page shows of a code cell: the cell without nbval's markers and
    without its plumbing statements (:func:`_plumbing`; one that is a block's only statement
    stays, so the code shown still parses), nor a ``print`` of a name such a statement bound.
    Only what is shown changes: the notebook runs as it is."""
    lines = [line for line in source.split("\n") if not MARKER.match(line)]
    text = "\n".join(lines)
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text.strip("\n")
    drop, bound = set(), set()
    def visit(body):
        plumbing = [n for n in body if _plumbing(n)]
        for node in body:
            if node in plumbing and len(plumbing) < len(body) or node in plumbing and body is tree.body:
                drop.update(range(node.lineno, node.end_lineno + 1))
                if isinstance(node, ast.Assign):
                    bound.update(ast.unparse(t) for t in node.targets)
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue   # a function's own checks are part of the code it teaches
            for field in ("body", "orelse", "finalbody"):
                if isinstance(getattr(node, field, None), list):
                    visit(getattr(node, field))
            for handler in getattr(node, "handlers", []):
                visit(handler.body)
    visit(tree.body)
    for node in tree.body:   # print(path) after `path = save_results(...)`
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and ast.unparse(node.value.func) == "print"
                and bound & {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}):
            drop.update(range(node.lineno, node.end_lineno + 1))
    kept = [line for k, line in enumerate(text.split("\n"), 1) if k not in drop]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip("\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if out of date")
    args = parser.parse_args(argv)
    stale = []
    for path in args.notebooks:
        text = path.read_text(encoding="utf-8")
        nb = json.loads(text)
        if apply(nb):
            stale.append(path)
            if not args.check:
                # the layout nbformat writes (indent 1, keys sorted), so only metadata lines move
                path.write_text(json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n",
                                encoding="utf-8")
        types = slide_types(nb)
        print(f"{path}: {types.count('slide')} slides, {types.count('subslide')} sub-slides, "
              f"{types.count('skip')} skipped cells" + (" (out of date)" if args.check and path in stale else ""))
    if args.check and stale:
        print(f"run: python scripts/slide_metadata.py {' '.join(map(str, stale))}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
