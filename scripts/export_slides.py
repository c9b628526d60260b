"""Export every notebook as a reveal.js slide deck that opens with no internet (`make slides`).

Usage: python scripts/export_slides.py [notebooks/NN_x.ipynb ...] [--out build/slides]

Writes one HTML deck per notebook and an index.html to --out, with a copy of the vendored
reveal.js, require.js and MathJax (slides/vendor/, fetched by scripts/fetch_slide_vendor.py)
and jQuery (course_utils/vendor/) in --out/vendor/, so the folder can be copied anywhere and
opened from disk. The decks use the stored outputs (nothing is executed); cells follow their
`slideshow.slide_type` metadata (scripts/slide_metadata.py). Widgets need a running kernel:
a widget output shows its static fallback (the HTML of one state that the course's
explorers send beside the widget, see course_utils.widgets) or nothing.
"""

from __future__ import annotations

import argparse
import copy
import html
import shutil
import sys
from pathlib import Path

import nbformat
from nbconvert import SlidesExporter

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


def exporter() -> SlidesExporter:
    return SlidesExporter(template_file=str(TEMPLATE), reveal_theme="white", reveal_scroll=True,
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
    nb = without_widgets(nbformat.read(notebook, as_version=4))
    body, _ = slides.from_notebook_node(nb, resources={"metadata": {"name": notebook.stem}})
    for name, url in URLS.items():  # nothing may point at the network any more
        assert "://" not in url, name
    deck = out / f"{notebook.stem}.html"
    deck.write_text(body, encoding="utf-8")
    return deck


def write_index(decks: list[Path], out: Path) -> Path:
    items = "\n".join(f'<li><a href="{d.name}">{html.escape(d.stem)}</a></li>' for d in decks)
    index = out / "index.html"
    index.write_text("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Attention-based "
                     "models: slides</title></head>\n<body><h1>Attention-based models: slides</h1>\n"
                     f"<ul>\n{items}\n</ul>\n<p>Keys: arrows move, <kbd>S</kbd> speaker notes, "
                     "<kbd>F</kbd> full screen, <kbd>Esc</kbd> overview.</p></body></html>\n")
    return index


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--out", type=Path, default=REPO / "build" / "slides")
    args = parser.parse_args(argv)
    notebooks = args.notebooks or sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    args.out.mkdir(parents=True, exist_ok=True)
    copy_vendor(args.out)
    slides = exporter()
    decks = []
    for notebook in notebooks:
        deck = export(notebook, args.out, slides)
        decks.append(deck)
        print(f"{deck.relative_to(args.out.parent) if args.out.parent in deck.parents else deck}: "
              f"{deck.stat().st_size / 1e6:.1f} MB")
    write_index(decks, args.out)
    vendor_mb = sum(f.stat().st_size for f in (args.out / "vendor").rglob("*") if f.is_file()) / 1e6
    print(f"{len(decks)} decks and index.html in {args.out} (vendor/: {vendor_mb:.1f} MB); "
          f"open {args.out / 'index.html'} in a browser, no internet needed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
