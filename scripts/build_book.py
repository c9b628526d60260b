"""Build the course website (`make book`): build/book/index.html, readable offline.

Usage: python scripts/build_book.py [--execute] [--out build/book]

Stages the sources in build/book-src: the pages of book/ (landing page, assignments,
lecturers, the API reference rendered from the docstrings), README.md (as _readme.md, which
the lecturer pages include), the stored notebooks without widget views or widget state (an
explorer keeps its static HTML, as in the slide decks: scripts/export_slides.py) and MathJax
from slides/vendor/ (no CDN); then runs Sphinx with MyST-NB and the book theme. The notebooks
are shown as executed and stored; ``--execute`` runs the staged copies first (fast profile,
as `make notebooks` does), leaving notebooks/ untouched.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
from export_slides import VENDOR, without_widgets  # noqa: E402  (scripts/, beside this file)

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
NOTEBOOKS = ROOT / "notebooks"


def modules_used(nb) -> list[str]:
    """The ``course_utils`` modules a notebook imports or names, in alphabetical order."""
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    found = set(re.findall(r"course_utils\.(\w+)", code))
    for inside, line in re.findall(r"from course_utils import (?:\(([^)]*)\)|([^\n#]+))", code):
        found |= {name.split()[0] for name in (inside or line).split(",") if name.strip()}
    modules = sorted(p.stem for p in (ROOT / "course_utils").glob("*.py") if not p.stem.startswith("_"))
    return [m for m in modules if m in found]


def with_code_links(nb):
    """``nb`` with a line under its title naming the course_utils modules it imports, each a
    link into the API reference."""
    modules = modules_used(nb)
    if modules:
        links = ", ".join(f"{{py:mod}}`course_utils.{m}`" for m in modules)
        note = nbformat.v4.new_markdown_cell(f"*The code of this chapter lives in {links}* (API reference).")
        nb.cells.insert(1, note)
    return nb


def stage(src: Path, execute: bool = False) -> Path:
    """Write the Sphinx source folder ``src`` (emptied first) and return it."""
    if src.exists():
        shutil.rmtree(src)
    shutil.copytree(BOOK, src, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "README.md", src / "_readme.md")
    (src / "notebooks").mkdir()
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        nb = with_code_links(without_widgets(nbformat.read(path, as_version=4)))
        nbformat.write(nb, src / "notebooks" / path.name)
    if execute:
        subprocess.run([sys.executable, str(ROOT / "scripts" / "execute_notebooks.py"),
                        *sorted(str(p) for p in (src / "notebooks").glob("*.ipynb"))], check=True, cwd=ROOT)
    if not (VENDOR / "mathjax" / "MathJax.js").exists():
        sys.exit(f"{VENDOR}/mathjax is missing: run `python scripts/fetch_slide_vendor.py`")
    shutil.copytree(VENDOR / "mathjax", src / "_static" / "mathjax")
    return src


def build(out: Path, execute: bool = False, src: Path | None = None) -> Path:
    """Stage and build the website into ``out``; returns ``out / 'index.html'``."""
    src = stage(src or out.parent / (out.name + "-src"), execute)
    if out.exists():
        shutil.rmtree(out)
    subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "--keep-going",
                    "-d", str(src / "_doctrees"), str(src), str(out)], check=True)
    return out / "index.html"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "book")
    parser.add_argument("--execute", action="store_true", help="execute the notebooks first (fast profile)")
    args = parser.parse_args(argv)
    index = build(args.out.resolve(), args.execute)
    print(f"website: {index} (open it in a browser; the folder works from disk or any web server)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
