"""Build the course website (`make book`): build/book/index.html, readable offline.

Usage: python scripts/build_book.py [--execute] [--out build/book]

Stages the sources in build/book-src: the pages of book/ (landing page, lecturer pages, the
API reference rendered from the docstrings), README.md (as _readme.md, which the lecturer
pages include), the stored notebooks without widget views or widget state (an explorer keeps
its static HTML, as in the slide decks: scripts/export_slides.py), each with a box that says
how to run it (clone the repository, two commands) and links its slides, a page on running
the course (its pip commands are README's, between the install-without-make markers), a
students' page per assignment found in assignments/release/ (what to write, the points, how
to hand in, the release notebook to download; never the solutions) and MathJax from
slides/vendor/ (no CDN); then runs Sphinx with MyST-NB and the book theme, and exports the
slide decks into the site's slides/ (scripts/export_slides.py, from the stored notebooks).
The repository's address is ``[project.urls] Repository`` in pyproject.toml
(export_slides.repository_url; unset, the pages say to ask the lecturer and name no address). The notebooks are shown as
executed and stored; ``--execute`` runs the staged copies first (fast profile, as `make
notebooks` does), leaving notebooks/ untouched.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

from course_utils.files import chapters as course_chapters
from scripts import export_slides
from scripts.export_slides import VENDOR, repository_url, without_widgets

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
NOTEBOOKS = ROOT / "notebooks"
RELEASE = ROOT / "assignments" / "release"
#: the clone's folder name in the instructions (as in README's hosted-service cell)
CLONE_AS = "attention-course"


#: the guides of docs/ that the website shows as they are (for lecturers; README.md links them)
GUIDES = ["RUNNING", "LECTURERS", "HUB", "GRADING", "PRESENTING", "CONTENTS", "CONTRIBUTING", "ARCHITECTURE"]


def clone(url: str) -> str:
    """How to get the repository, as Markdown: the clone command, or (address unset) whom to ask."""
    if url:
        return f"`git clone {url} {CLONE_AS}`"
    return (f"a copy of the course's repository from your lecturer (a `git clone` of the address "
            f"they give you, into a folder `{CLONE_AS}`)")


def readme_pip_commands(readme: Path = ROOT / "README.md") -> str:
    """The fenced block of README's set-up without make (between its install-without-make markers)."""
    text = readme.read_text(encoding="utf-8")
    found = re.search(r"<!-- install-without-make: begin[^>]*-->\s*(```.*?```)\s*<!-- install-without-make: end -->",
                      text, re.S)
    if not found:
        raise ValueError(f"{readme}: no block between the install-without-make markers (the run page shows it)")
    return found.group(1)


def get_it(url: str) -> str:
    """Step 1 of the run page: the clone, or (address unset) whom to ask; never an invented address."""
    if url:
        return f"""```bash
git clone {url} {CLONE_AS}
cd {CLONE_AS}
```

(Or download the repository as an archive from <{url}> and unpack it.) You need Python 3.11 or
newer with `pip` and `venv`."""
    return f"""Ask your lecturer for the course's repository (its address was not set when this website
was built): clone it with git into a folder `{CLONE_AS}`, or unpack the archive they hand out,
and change into that folder. You need Python 3.11 or newer with `pip` and `venv`."""


def run_page(url: str) -> str:
    """book's run.md: how to get the course running (clone, make or pip, or a hub)."""
    return f"""# Run the course yourself

This website shows the notebooks as they were executed and stored. To run them, change them
and do the assignments, you need the whole repository: each notebook imports the course's
package `course_utils` and reads the shipped data in `data/`, so a notebook downloaded alone
does not run.

## 1. Get the repository

{get_it(url)}

## 2. Install and start JupyterLab

With `make` (Linux, macOS):

| command | what it does |
|---|---|
| `make lab` | creates `.venv` if needed (PyTorch first, pinned), installs the course, starts JupyterLab |
| `make test` | the same set-up, then every unit test and strict `nbval` over every notebook |

Without `make` (Windows too; there the folder is `.venv\\Scripts\\` instead of `.venv/bin/`):

{readme_pip_commands()}

## 3. Open a chapter

JupyterLab opens on `notebooks/`: start with `00_welcome.ipynb`, then the chapters in order.
The home assignments are in `assignments/release/` (see [Assignments](assignments/index.md)).

**On a JupyterHub or BinderHub** that your course runs from the repository's `binder/`
configuration, the course is already installed: open `notebooks/` there and skip steps 1-2.
[Running the course](docs/RUNNING.md) covers every command, a torch you already have and
hosted notebook services; [the hub guide](docs/HUB.md) a JupyterHub for a class.
"""


def run_box(chapter: str, url: str) -> str:
    """The box at the top of a chapter page: how to run it, and its slides."""
    return f"""```{{admonition}} Run this chapter yourself
:class: tip course-run

This page is the notebook `{chapter}.ipynb` as executed and stored. To run it: {clone(url)},
then `make lab` in that folder (or the pip commands of [Run the course](../run.md),
or the course's JupyterHub), and open `notebooks/{chapter}.ipynb`. The notebook downloaded alone
needs the package `course_utils` and the `data/` of the repository.

**Slides**: <a class="course-slides" href="../slides/{chapter}.html">{chapter} as a reveal.js deck</a>
(offline; all decks: <a href="../slides/index.html">slides/index.html</a>).
```"""


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


def with_run_box(nb, chapter: str, url: str):
    """``nb`` with the run-it-yourself box right under its title (inside the title cell)."""
    heading, _, rest = nb.cells[0].source.partition("\n")
    nb.cells[0].source = f"{heading}\n\n{run_box(chapter, url)}\n\n{rest.strip()}\n"
    return nb


def chapter_table(chapters: list[Path]) -> str:
    """The landing page's table of chapters: each chapter's page and its slide deck."""
    rows = ["| chapter | slides |", "|---|---|"]
    for path in chapters:
        rows.append(f"| [{export_slides.title(path)}](notebooks/{path.stem}.ipynb) "
                    f'| <a class="course-slides" href="slides/{path.stem}.html">deck</a> |')
    return "\n".join(rows) + "\n"


def _unfinished(tree: ast.Module) -> list[str]:
    """The functions and methods of a release answer cell that the student writes (those that
    raise NotImplementedError), as ``name`` or ``Class.name``."""
    names = []
    def raises(fn):
        return any(isinstance(n, ast.Raise) and "NotImplementedError" in ast.unparse(n) for n in ast.walk(fn))
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and raises(node):
            names.append(node.name)
        elif isinstance(node, ast.ClassDef):
            names += [f"{node.name}.{m.name}" for m in node.body
                      if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and raises(m)]
    return names


def assignment(notebook: Path) -> dict:
    """What a student needs to know about a release notebook: its title, introduction, the
    chapter it comes from, its parts (heading, points, what the student writes), the total
    points and how to hand it in (its Submitting section)."""
    nb = nbformat.read(notebook, as_version=4)
    first = nb.cells[0].source.strip().split("\n", 1)
    info = {"name": notebook.stem, "title": first[0].lstrip("# ").strip(),
            "intro": first[1].strip() if len(first) > 1 else "", "parts": [], "submitting": "",
            "points": 0, "chapter": None}
    chapter = re.search(r"notebook `(\d\d_\w+)`", info["intro"])
    if chapter and (NOTEBOOKS / f"{chapter.group(1)}.ipynb").exists():
        info["chapter"] = chapter.group(1)
    part = None
    for cell in nb.cells[1:]:
        grading = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "markdown" and cell.source.startswith("## "):
            heading, _, body = cell.source[3:].partition("\n")
            if heading.strip().lower() == "submitting":
                info["submitting"], part = body.strip(), None
                continue
            points = re.search(r"\((\d+) points?", heading)
            part = {"heading": re.sub(r"\s*\(\d+ points?[^)]*\)", "", heading).strip(),
                    "points": int(points.group(1)) if points else 0, "writes": []}
            info["parts"].append(part)
        elif cell.cell_type == "code" and grading.get("solution") and part is not None:
            try:
                part["writes"] += _unfinished(ast.parse(cell.source))
            except SyntaxError:
                pass
        if grading.get("grade"):
            info["points"] += int(grading.get("points", 0))
    info["parts"] = [p for p in info["parts"] if p["points"] or p["writes"]]
    return info


def assignment_page(info: dict, url: str) -> str:
    """A students' page for one assignment (from :func:`assignment`)."""
    name = info["name"]
    rows = "\n".join(f"| {p['heading']} | {', '.join(f'`{w}`' for w in p['writes']) or 'see the notebook'} "
                     f"| {p['points'] or ''} |" for p in info["parts"])
    chapter = (f"It goes with the chapter [{export_slides.title(NOTEBOOKS / (info['chapter'] + '.ipynb'))}]"
               f"(../notebooks/{info['chapter']}.ipynb).\n") if info["chapter"] else ""
    submitting = info["submitting"] or "Run the whole notebook and hand it in."
    return f"""# {info['title']}

**The notebook**: {{download}}`{name}.ipynb <../_release/{name}/{name}.ipynb>` (the student
version: the cells you fill in say `# YOUR CODE HERE`; {info['points']} points in all).
{chapter}
{info['intro']}

## What you write

| part | you write | points |
|---|---|---|
{rows}

The visible tests in the notebook check your answers as you go; the lecturer's grader runs
hidden tests too, and an answer scores its points in full or not at all.

## How to work on it

The notebook imports the course's package `course_utils`, so it runs inside the course's
repository: `git clone {url} {CLONE_AS}`, then `make lab` (or the pip commands of
[Run the course](../run.md)) and open `assignments/release/{name}/{name}.ipynb` in JupyterLab,
or on the course's JupyterHub. Work in that file (or a copy in the same folder).

## How to hand it in

{submitting}

Hand it in the way your lecturer asks (the course's learning platform, or nbgrader's exchange
on a JupyterHub).
"""


def assignments_index(infos: list[dict]) -> str:
    """The students' overview of the assignments: title, chapter, points, notebook."""
    def row(i):
        chapter = f"[{i['chapter'][:2]}](../notebooks/{i['chapter']}.ipynb)" if i["chapter"] else ""
        download = f"{{download}}`{i['name']}.ipynb <../_release/{i['name']}/{i['name']}.ipynb>`"
        return f"| [{i['title']}]({i['name']}.md) | {chapter} | {i['points']} | {download} |"
    rows = "\n".join(row(i) for i in infos)
    toctree = "\n".join(i["name"] for i in infos)
    return f"""# Assignments

Home assignments, one per major topic, each a notebook you complete and hand in. Each page
says what you write, how many points it is worth and how to hand it in; the notebook runs
inside the course's repository ([Run the course](../run.md)).

| assignment | chapter | points | notebook |
|---|---|---|---|
{rows}

```{{toctree}}
:hidden:

{toctree}
```
"""


def stage_assignments(src: Path, url: str) -> list[dict]:
    """A page per release notebook in assignments/release/ and their index; the release
    notebooks are copied, unchanged, for download."""
    releases = sorted(RELEASE.glob("*/*.ipynb"))
    releases = [p for p in releases if p.stem == p.parent.name and ".ipynb_checkpoints" not in p.parts]
    infos = [assignment(p) for p in releases]
    (src / "assignments").mkdir()
    for path, info in zip(releases, infos):
        (src / "_release" / path.stem).mkdir(parents=True)
        shutil.copy2(path, src / "_release" / path.stem / path.name)
        (src / "assignments" / f"{path.stem}.md").write_text(assignment_page(info, url), encoding="utf-8")
    (src / "assignments" / "index.md").write_text(assignments_index(infos), encoding="utf-8")
    return infos


def stage(src: Path, execute: bool = False) -> Path:
    """Write the Sphinx source folder ``src`` (emptied first) and return it."""
    if src.exists():
        shutil.rmtree(src)
    shutil.copytree(BOOK, src, ignore=shutil.ignore_patterns("__pycache__"))
    (src / "docs").mkdir()
    for guide in GUIDES:   # shown as they are; their links to one another stay links
        shutil.copy(ROOT / "docs" / f"{guide}.md", src / "docs" / f"{guide}.md")
    url = repository_url()
    (src / "run.md").write_text(run_page(url), encoding="utf-8")
    stage_assignments(src, url)
    (src / "notebooks").mkdir()
    chapters = course_chapters()
    (src / "_chapters.md").write_text(chapter_table(chapters), encoding="utf-8")
    (src / "_repository.md").write_text(
        (f"The course's repository: <{url}>. Clone it with {clone(url)}.\n" if url else
         f"Get {clone(url)}.\n"), encoding="utf-8")
    for path in chapters:
        nb = with_code_links(without_widgets(nbformat.read(path, as_version=4)))
        nbformat.write(with_run_box(nb, path.stem, url), src / "notebooks" / path.name)
    if execute:
        subprocess.run([sys.executable, str(ROOT / "scripts" / "execute_notebooks.py"),
                        *sorted(str(p) for p in (src / "notebooks").glob("*.ipynb"))], check=True, cwd=ROOT)
    for staged in (src / "notebooks").glob("*.ipynb"):   # as a lecture shows them (after running them)
        nbformat.write(export_slides.presented(nbformat.read(staged, as_version=4)), staged)
    if not (VENDOR / "mathjax" / "MathJax.js").exists():
        sys.exit(f"{VENDOR}/mathjax is missing: run `python scripts/fetch_slide_vendor.py`")
    shutil.copytree(VENDOR / "mathjax", src / "_static" / "mathjax")
    return src


def build(out: Path, execute: bool = False, src: Path | None = None) -> Path:
    """Stage and build the website into ``out``, with the slide decks in ``out/slides``;
    returns ``out / 'index.html'``."""
    src = stage(src or out.parent / (out.name + "-src"), execute)
    if out.exists():
        shutil.rmtree(out)
    env = {**os.environ, "COURSE_REPOSITORY_URL": repository_url()}   # book/conf.py reads it
    subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "--keep-going",
                    "-d", str(src / "_doctrees"), str(src), str(out)], check=True, env=env)
    chapters = course_chapters()
    export_slides.main([*map(str, chapters), "--out", str(out / "slides"), "--home", "../index.html"])
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
