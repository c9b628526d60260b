"""Export every notebook as a reveal.js slide deck that opens with no internet (`make slides`).

Usage: python scripts/export_slides.py [notebooks/NN_x.ipynb ...] [--out build/slides]

Writes one HTML deck per notebook and an index.html to --out, with a copy of the vendored
reveal.js, require.js and MathJax (slides/vendor/, fetched by scripts/fetch_slide_vendor.py)
and jQuery (course_utils/vendor/) in --out/vendor/, so the folder can be copied anywhere and
opened from disk. The decks use the stored outputs (nothing is executed); cells follow their
`slideshow.slide_type` metadata (scripts/slide_metadata.py). Widgets need a running kernel:
a widget output shows its static fallback (the HTML of one state that the course's
explorers send beside the widget, see course_utils.widgets) or nothing.

The slides are 1280x720 (16:9; slides/course_reveal.html.j2 lays them out): a long title cell
is split after its first paragraph (the learning goals go on a sub-slide of their own), a text
cell with several `##` sections (Summary, Exercises) gives each its own slide, each figure
gets a sub-slide of its own (figures_apart), long code scrolls inside its box, and a slide still
taller than 1280x720 is scaled down to fit (the template); tests/test_slides.py checks every slide
of every deck in Chromium.
"""

from __future__ import annotations

import argparse
import copy
import html
import json
import re
import os
import shutil
import sys
import tomllib
from pathlib import Path

import nbformat
from nbconvert import SlidesExporter
from traitlets.config import Config

from course_utils.files import chapters  # the course's notebooks in taught order (one definition)
from scripts.slide_metadata import shown_source

REPO = Path(__file__).resolve().parent.parent
VENDOR = REPO / "slides" / "vendor"
JQUERY = REPO / "course_utils" / "vendor" / "jquery-2.2.4.min.js"
TEMPLATE = REPO / "slides" / "course_reveal.html.j2"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

#: URLs relative to the deck; nbconvert's defaults load all of these from CDNs.
URLS = {
    "reveal_url_prefix": "vendor/reveal.js",
    "require_js_url": "vendor/require.js",
    "jquery_url": "vendor/jquery.min.js",
    # one combined MathJax 2 configuration: TeX input, AMS macros, CommonHTML output
    "mathjax_url": "vendor/mathjax/MathJax.js?config=TeX-AMS_CHTML",
}


def repository_url(pyproject: Path = REPO / "pyproject.toml") -> str:
    """The course's public git address: ``[project.urls] Repository`` in pyproject.toml, the one
    place it is set (COURSE_REPOSITORY_URL overrides it for one build); "" while it is unset.
    The website, the decks and the README's hosted first cell take it from here."""
    if os.environ.get("COURSE_REPOSITORY_URL", "").strip():
        return os.environ["COURSE_REPOSITORY_URL"].strip()
    with open(pyproject, "rb") as f:
        urls = tomllib.load(f).get("project", {}).get("urls", {})
    return str(urls.get("Repository", "")).strip()


def how_to_get(url: str) -> str:
    """One sentence (HTML) on where the course's repository is; names no address when unset."""
    if url:
        return f'The course\'s repository: <a href="{html.escape(url)}">{html.escape(url)}</a>.'
    return ("To run the notebooks, get the course's repository from your lecturer "
            "(its address is not set in this build).")


def without_widgets(nb):
    """A copy of ``nb`` without widget views and widget state (they need a kernel); a widget
    output that carries a static fallback (``text/html``) keeps it, any other is left out."""
    nb = copy.deepcopy(nb)
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        kept = []
        for out in cell.outputs:
            data = out.get("data", {})
            if WIDGET_VIEW in data:
                if "text/html" not in data:
                    continue
                out = copy.deepcopy(out)
                out["data"] = {"text/html": data["text/html"]}
            kept.append(out)
        cell.outputs = kept
    return nb


#: the cell tags of a presented notebook (the decks and the website honour them, as MyST-NB does)
NO_INPUT, NO_CELL = "remove-input", "remove-cell"


def presented(nb):
    """A copy of ``nb`` as a lecture shows it: each code cell's source without nbval's markers
    and plumbing (slide_metadata.shown_source: asserts, save_results, ...); a cell left with
    no code keeps its outputs without an input (tag ``remove-input``) or, with none, is left
    out (``remove-cell``). The notebook's own cells are untouched."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cell.source = shown_source(cell.source)
        if not cell.source.strip():
            tags = cell.metadata.setdefault("tags", [])
            tags.append(NO_INPUT if cell.outputs else NO_CELL)
    return nb


#: a title cell longer than this many lines is split after its first paragraph
TITLE_LINES = 10


def split_title(nb):
    """``nb`` with a long first cell (title, introduction, learning goals) cut in two: the
    title and its first paragraph stay on the title slide, the rest starts a sub-slide."""
    first = nb.cells[0] if nb.cells else None
    if first is None or first.cell_type != "markdown" or first.source.count("\n") < TITLE_LINES:
        return nb
    parts = first.source.split("\n\n")
    if len(parts) < 3:
        return nb
    nb = copy.deepcopy(nb)
    head, rest = "\n\n".join(parts[:2]), "\n\n".join(parts[2:])
    nb.cells[0].source = head
    goals = nbformat.v4.new_markdown_cell(rest, metadata={"slideshow": {"slide_type": "subslide"}})
    if "id" in nb.cells[0]:
        goals["id"] = f"{nb.cells[0]['id'][:58]}-goals"
    nb.cells.insert(1, goals)
    return nb


def split_sections(nb):
    """``nb`` with every text cell that holds several ``##`` sections (a Summary followed by
    the Exercises, say) cut at each such heading, so that each section starts a slide."""
    cells = []
    for cell in nb.cells:
        lines, fenced, parts = cell.source.split("\n"), False, [[]]
        if cell.cell_type == "markdown":
            for line in lines:
                fenced ^= line.lstrip().startswith("```")
                if not fenced and line.startswith("## ") and any(x.strip() for x in parts[-1]):
                    parts.append([])
                parts[-1].append(line)
        if len(parts) < 2:
            cells.append(cell)
            continue
        for k, part in enumerate(parts):
            piece = copy.deepcopy(cell)
            piece.source = "\n".join(part).strip("\n")
            if k:
                piece.metadata["slideshow"] = {"slide_type": "slide"}
                if "id" in piece:
                    piece["id"] = f"{piece['id'][:60]}-{k}"  # ids stay unique
            cells.append(piece)
    nb = copy.copy(nb)
    nb.cells = cells
    return nb


def _is_figure(output) -> bool:
    return any(k.startswith("image/") for k in output.get("data", {}))


#: a code cell this short keeps its (first) figure on its slide
SHORT_CODE = 4


def figures_apart(nb):
    """``nb`` with every figure on a sub-slide of its own: a code cell that draws keeps its code
    (and what it printed before the figure) where it was, and each figure, with the text printed
    after it, becomes an input-less cell (tag ``remove-input``) that starts a sub-slide. A code
    cell and its figure together are taller than a 1280x720 slide (a legend or an axis below the
    fold), and a figure alone is drawn as large as the slide allows (slides/course_reveal.html.j2).
    A cell whose code is hidden or short (SHORT_CODE lines: a plot call) keeps its first figure."""
    cells = []
    for cell in nb.cells:
        outputs = cell.get("outputs", []) if cell.cell_type == "code" else []
        starts = [i for i, o in enumerate(outputs) if _is_figure(o)]
        hidden = NO_INPUT in cell.metadata.get("tags", [])
        kind = cell.metadata.get("slideshow", {}).get("slide_type")
        if kind in ("skip", "notes") or NO_CELL in cell.metadata.get("tags", []):
            starts = []   # not on a slide at all
        elif hidden or len(cell.source.strip().splitlines()) <= SHORT_CODE:
            starts = starts[1:]   # a plot call stays with its figure (paged() gives them a slide)
        if not starts:
            cells.append(cell)
            continue
        head = copy.deepcopy(cell)
        head.outputs = outputs[:starts[0]]
        if not head.source.strip() and not head.outputs:
            head = None
        if head is not None:
            cells.append(head)
        for k, (a, b) in enumerate(zip(starts, [*starts[1:], len(outputs)])):
            piece = copy.deepcopy(cell)
            piece.outputs = outputs[a:b]
            piece.metadata["slideshow"] = {"slide_type": "subslide"}
            tags = [t for t in piece.metadata.get("tags", []) if t != NO_CELL]
            piece.metadata["tags"] = [*tags, NO_INPUT] if NO_INPUT not in tags else tags
            if "id" in piece:
                piece["id"] = f"{piece['id'][:56]}-fig{k}"   # ids stay unique
            cells.append(piece)
    nb = copy.copy(nb)
    nb.cells = cells
    return nb


#: the height a slide has for content (1280x720 less the margins and the strip at the bottom
#: that reveal.js's arrows take, slides/course_reveal.html.j2), in CSS pixels
SLIDE_HEIGHT = 618


def _wrapped(text: str, width: int) -> int:
    return sum(max(1, -(-len(line) // width)) for line in text.splitlines() or [""])


def height(cell) -> int:
    """About how tall ``cell`` is drawn on a slide, in CSS pixels (the template's fonts: text
    23 px, code 16 px at most 420 px before it scrolls, printed text 15 px at most 360 px,
    figures at most 600 px); 0 for a cell that is not shown."""
    tags = cell.metadata.get("tags", [])
    if NO_CELL in tags or cell.metadata.get("slideshow", {}).get("slide_type") in ("skip", "notes"):
        return 0
    if cell.cell_type == "markdown":
        px = 0
        for block in cell.source.split("\n\n"):
            head = block.lstrip().startswith("#")
            px += (56 if head else 33 * _wrapped(block, 95)) + 14
        return px
    if cell.cell_type != "code":
        return 0
    px = 0 if NO_INPUT in tags else min(21 * _wrapped(cell.source, 110), 420) + 24
    for out in cell.get("outputs", []):
        data = out.get("data", {})
        if _is_figure(out):
            px += 600
        elif "text/html" in data and re.search(r"<(svg|script|img|canvas)\b", "".join(data["text/html"])):
            px += 600   # a drawing or an interactive view (bertviz)
        elif "text/html" in data:
            rows = "".join(data["text/html"]).count("<tr")
            px += min(30 * max(rows, 2), 600) + 10
        else:
            text = out.get("text") or "".join(data.get("text/plain", ""))
            px += min(20 * _wrapped(str(text), 125), 360) + 10
    return px


def _text_pages(cell) -> list:
    """A text cell taller than a slide (an appendix, say) cut between paragraphs, lists and
    tables (never inside a fenced block) into pieces that each fit a slide; any other cell as is."""
    if cell.cell_type != "markdown" or height(cell) <= SLIDE_HEIGHT:
        return [cell]
    blocks, fenced = [[]], False
    for line in cell.source.split("\n"):
        if not fenced and not line.strip() and blocks[-1]:
            blocks.append([])
            continue
        fenced ^= line.lstrip().startswith("```")
        blocks[-1].append(line)
    pages, current = [], []
    for block in ("\n".join(b) for b in blocks if b):
        trial = nbformat.v4.new_markdown_cell("\n\n".join([*current, block]))
        if current and height(trial) > SLIDE_HEIGHT:
            pages.append(current)
            current = []
        current.append(block)
    pages.append(current)
    pieces = []
    for k, page in enumerate(pages):
        piece = copy.deepcopy(cell)
        piece.source = "\n\n".join(page)
        if k:
            piece.metadata["slideshow"] = {"slide_type": "subslide"}
            if "id" in piece:
                piece["id"] = f"{piece['id'][:56]}-p{k}"   # ids stay unique
        pieces.append(piece)
    return pieces


def paged(nb):
    """``nb`` with a sub-slide started wherever the slide so far and the next cell would not fit
    the slide together (height(), against SLIDE_HEIGHT): a section's text, then its code on the
    next sub-slide, its printed results on the one after, instead of one slide shrunk to
    illegible. A cell alone taller than a slide keeps it to itself (the template scales it)."""
    cells, used = [], 0
    for cell in (piece for cell in nb.cells for piece in _text_pages(cell)):
        h = height(cell)
        kind = cell.metadata.get("slideshow", {}).get("slide_type")
        if kind in ("slide", "subslide"):
            used = 0
        elif h and used and used + h > SLIDE_HEIGHT:
            cell = copy.deepcopy(cell)
            cell.metadata["slideshow"] = {"slide_type": "subslide"}
            used = 0
        used += h
        cells.append(cell)
    nb = copy.copy(nb)
    nb.cells = cells
    return nb


def title(notebook: Path) -> str:
    """The notebook's first heading, as plain text (``# 04 · The *Transformer*`` -> ``04 · The Transformer``)."""
    first = json.loads(notebook.read_text(encoding="utf-8"))["cells"][0]
    line = "".join(first["source"]).strip().splitlines()[0]
    return line.lstrip("#").replace("*", "").replace("`", "").strip()


def exporter() -> SlidesExporter:
    config = Config()
    config.TagRemovePreprocessor.enabled = True
    config.TagRemovePreprocessor.remove_input_tags = {NO_INPUT}
    config.TagRemovePreprocessor.remove_cell_tags = {NO_CELL}
    return SlidesExporter(config=config, template_file=str(TEMPLATE), reveal_theme="white", reveal_scroll=True,
                          reveal_transition="none", reveal_number="c/t", **URLS)


def copy_vendor(out: Path) -> None:
    if not (VENDOR / "reveal.js" / "dist" / "reveal.js").exists():
        sys.exit(f"{VENDOR} is incomplete: run `python scripts/fetch_slide_vendor.py`")
    target = out / "vendor"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(VENDOR, target)
    shutil.copy2(JQUERY, target / "jquery.min.js")


def export(notebook: Path, out: Path, slides: SlidesExporter) -> Path:
    nb = paged(figures_apart(split_sections(split_title(presented(without_widgets(
        nbformat.read(notebook, as_version=4)))))))
    body, _ = slides.from_notebook_node(nb, resources={"metadata": {"name": notebook.stem}})
    for name, url in URLS.items():  # nothing may point at the network any more
        assert "://" not in url, name
    deck = out / f"{notebook.stem}.html"
    deck.write_text(body, encoding="utf-8")
    return deck


INDEX_CSS = """
body { font-family: "Source Sans Pro", "Helvetica Neue", Arial, sans-serif; margin: 0; color: #222;
       background: #f6f7f9; line-height: 1.5; }
header { background: #1f3b57; color: #fff; padding: 28px 40px 22px; }
header h1 { margin: 0; font-size: 32px; font-weight: 600; }
header p { margin: 6px 0 0; opacity: 0.85; }
header a { color: #fff; }
main { max-width: 1100px; margin: 0 auto; padding: 24px 40px 40px; }
ol.decks { list-style: none; padding: 0; display: grid; gap: 14px;
           grid-template-columns: repeat(auto-fill, minmax(320px, 1fr)); }
ol.decks li { background: #fff; border: 1px solid #dde1e6; border-radius: 8px; padding: 14px 18px; }
ol.decks a { font-size: 20px; font-weight: 600; color: #1f5fa6; text-decoration: none; }
ol.decks a:hover { text-decoration: underline; }
ol.decks .meta { color: #666; font-size: 14px; margin-top: 4px; }
kbd { border: 1px solid #bbb; border-bottom-width: 2px; border-radius: 3px; padding: 0 5px;
      background: #fff; font-size: 0.9em; }
"""


def slide_count(deck: Path) -> int:
    """How many slides and sub-slides a deck holds (its innermost ``<section>`` elements)."""
    text = deck.read_text(encoding="utf-8")
    return max(text.count("<section") - len(re.findall(r"<section[^>]*>\s*<section", text)), 0)


def write_index(decks: list[tuple[Path, str]], out: Path, home: str | None = None,
                url: str | None = None) -> Path:
    """A styled index.html in ``out`` listing ``decks`` ((path, title) pairs); ``home``: a
    link back to the course website, when the decks are part of it."""
    items = "\n".join(
        f'<li><a href="{html.escape(d.name)}">{html.escape(title)}</a>'
        f'<div class="meta">{slide_count(d)} slides · {d.stat().st_size / 1e6:.1f} MB</div></li>'
        for d, title in decks)
    back = f' · <a href="{html.escape(home)}">the course website</a>' if home else ""
    where = how_to_get(repository_url() if url is None else url)
    index = out / "index.html"
    index.write_text(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>Attention-based models: slides</title><style>{INDEX_CSS}</style></head>\n<body>\n"
        "<header><h1>Attention-based models: slides</h1>"
        f"<p>One reveal.js deck per notebook, built from the stored outputs; works offline{back}</p></header>\n"
        f"<main>\n<ol class=\"decks\">\n{items}\n</ol>\n"
        "<p>Keys: <kbd>→</kbd> <kbd>←</kbd> next and previous slide (<kbd>↓</kbd> <kbd>↑</kbd> within a "
        "section), <kbd>S</kbd> speaker notes, <kbd>F</kbd> full screen, <kbd>Esc</kbd> overview. "
        "A long code cell scrolls with the mouse wheel.</p>\n"
        f"<p class=\"repository\">{where}</p>\n</main>\n</body></html>\n",
        encoding="utf-8")
    return index


def shown(path: Path) -> Path:
    """``path`` as the log prints it: relative to the working folder when inside it."""
    path = path.resolve()
    try:
        return path.relative_to(Path.cwd().resolve())
    except ValueError:
        return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--out", type=Path, default=REPO / "build" / "slides")
    parser.add_argument("--home", help="a link from the index back to the course website (relative URL)")
    args = parser.parse_args(argv)
    notebooks = args.notebooks or chapters()
    args.out.mkdir(parents=True, exist_ok=True)
    copy_vendor(args.out)
    slides = exporter()
    decks = []
    for notebook in notebooks:
        deck = export(notebook, args.out, slides)
        decks.append((deck, title(notebook)))
        print(f"{shown(deck)}: {deck.stat().st_size / 1e6:.1f} MB")
    index = write_index(decks, args.out, args.home)
    vendor_mb = sum(f.stat().st_size for f in (args.out / "vendor").rglob("*") if f.is_file()) / 1e6
    print(f"{len(decks)} decks and index.html in {shown(args.out)}/ (vendor/: {vendor_mb:.1f} MB); "
          f"open {shown(index)} in a browser, no internet needed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
