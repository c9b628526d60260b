"""Lecturers' mode: slide metadata on every notebook, the vendored deck libraries, the
exported reveal.js decks opening offline in Chromium, and RISE slides inside JupyterLab."""

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

import browser

REPO = browser.REPO
NOTEBOOKS = sorted(browser.NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
needs_browser = pytest.mark.skipif(bool(browser.missing_browser()), reason=str(browser.missing_browser()))


def _script(name):
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


slide_metadata = _script("slide_metadata")
export_slides = _script("export_slides")
fetch_slide_vendor = _script("fetch_slide_vendor")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_cell_has_slide_metadata_by_the_rules(path):
    nb = json.loads(path.read_text())
    types = [c["metadata"].get("slideshow", {}).get("slide_type") for c in nb["cells"]]
    assert None not in types, f"{path.name}: cells without slide metadata; run scripts/slide_metadata.py {path}"
    assert types[0] == "slide" and types.count("slide") >= 3
    assert types == slide_metadata.slide_types(nb), f"out of date: run scripts/slide_metadata.py {path}"
    assert nb["metadata"].get("rise", {}).get("scroll") is True
    # the Summary and Exercises headings start slides; set-up is skipped
    for cell, kind in zip(nb["cells"], types):
        if cell["cell_type"] == "markdown" and "".join(cell["source"]).startswith(("## Summary", "## Exercises")):
            assert kind == "slide"
        if cell["cell_type"] == "code" and "summary = setup(" in "".join(cell["source"]):
            assert kind == "skip"


def test_slide_rules_are_idempotent_and_touch_only_metadata():
    nb = json.loads(NOTEBOOKS[0].read_text())
    for cell in nb["cells"]:
        cell["metadata"].pop("slideshow", None)
    before = json.dumps([(c["source"], c.get("outputs")) for c in nb["cells"]])
    assert slide_metadata.apply(nb) is True
    assert slide_metadata.apply(nb) is False
    assert json.dumps([(c["source"], c.get("outputs")) for c in nb["cells"]]) == before
    # a hand-made choice survives
    nb["cells"][1]["metadata"]["slideshow"] = {"slide_type": "notes", "keep": True}
    slide_metadata.apply(nb)
    assert nb["cells"][1]["metadata"]["slideshow"]["slide_type"] == "notes"


def test_check_rules_on_small_cells():
    def code(src, outputs=()):
        return {"cell_type": "code", "source": src, "metadata": {}, "outputs": list(outputs)}
    def md(src):
        return {"cell_type": "markdown", "source": src, "metadata": {}}
    figure = {"output_type": "display_data", "data": {"image/png": "", "text/plain": "<Figure>"}}
    nb = {"cells": [md("# Title"), code("summary = setup()"), code("assert x\nprint('ok')"),
                    md("## Part"), md("### Detail"), code("plt.plot(x)\nplt.show()", [figure]),
                    code("x = 1\nassert x")]}
    assert slide_metadata.slide_types(nb) == ["slide", "skip", "skip", "slide", "subslide", "-", "-"]


def test_vendored_deck_libraries_match_their_checksums_and_carry_licences():
    assert fetch_slide_vendor.check() == []
    vendor = fetch_slide_vendor.VENDOR
    for licence in ("reveal.js/LICENSE", "mathjax/LICENSE", "reveal.js/dist/theme/fonts/source-sans-pro/LICENSE"):
        assert (vendor / licence).stat().st_size > 500, licence
    assert "Released under MIT license" in (vendor / "require.js").read_text()[:300]
    size = sum(p.stat().st_size for p in vendor.rglob("*") if p.is_file())
    assert size < 2.5e6, f"slides/vendor/ holds {size / 1e6:.1f} MB: keep only what decks load"


def test_exported_deck_loads_nothing_from_the_network(tmp_path):
    export_slides.copy_vendor(tmp_path)
    deck = export_slides.export(NOTEBOOKS[0], tmp_path, export_slides.exporter())
    page = deck.read_text()
    assert not re.findall(r"(?:src|href)=[\"']https?://", page), "a script or style from the network"
    assert "vendor/reveal.js/dist/reveal.js" in page and "vendor/mathjax/MathJax.js" in page
    assert "application/vnd.jupyter.widget-view+json" not in page and "mermaid" not in page.split("<body")[0]
    assert (tmp_path / "vendor" / "jquery.min.js").exists()


def _first_heading(path) -> str:
    first = json.loads(path.read_text())["cells"][0]
    return "".join(first["source"]).splitlines()[0].lstrip("# ").strip()


@needs_browser
def test_exported_decks_open_offline_and_show_their_first_slide(tmp_path):
    """Every deck, exported to a folder and opened from disk with the network cut off:
    reveal.js starts, the first slide shows the notebook's title, MathJax typesets the
    formulas, the next slide can be reached, nothing is fetched from outside."""
    out = tmp_path / "slides"
    assert export_slides.main([*map(str, NOTEBOOKS), "--out", str(out)]) == 0
    shots = browser.BUILD / "slides-check"
    shots.mkdir(parents=True, exist_ok=True)
    with browser.offline_chromium(tmp_path / "profile", viewport=(1280, 800)) as (context, blocked):
        for notebook in NOTEBOOKS:
            page = context.new_page()
            errors = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto((out / f"{notebook.stem}.html").as_uri())
            page.wait_for_selector(".reveal.ready", timeout=30_000)
            current = page.locator(".reveal .slides > section.present")
            title = _first_heading(notebook)
            # (the theme writes headings in capitals)
            assert title.replace("*", "").lower() in current.inner_text().lower(), f"{notebook.name}: first slide"
            assert current.bounding_box()["height"] > 200
            markdown = "".join("".join(c["source"]) for c in json.loads(notebook.read_text())["cells"]
                               if c["cell_type"] == "markdown")
            if "$" in markdown:  # formulas (outputs may hold jQuery's `$`, which is no math)
                page.wait_for_function("() => window.MathJax && MathJax.Hub && MathJax.Hub.queue.pending === 0 "
                                       "&& document.querySelectorAll('.MathJax_CHTML').length > 0",
                                       timeout=30_000)
            page.screenshot(path=str(shots / f"{notebook.stem}.png"))
            if page.locator(".reveal .slides > section").count() < 2:  # metadata missing (see above)
                page.close()
                continue
            page.keyboard.press("ArrowRight")
            page.wait_for_function("() => [...document.querySelectorAll('.reveal .slides > section')]"
                                   ".indexOf(document.querySelector('.reveal .slides > section.present')) === 1",
                                   timeout=10_000)
            assert not errors, f"{notebook.name}: {errors}"
            page.close()
    assert not blocked, f"the decks tried to reach the network: {blocked[:5]}"


def _rise_notebook(folder: Path) -> str:
    import nbformat
    title = nbformat.v4.new_markdown_cell("# RISE check\n\nEuler: $e^{i\\pi} + 1 = 0$",
                                          metadata={"slideshow": {"slide_type": "slide"}})
    widget = nbformat.v4.new_code_cell("import ipywidgets as W\nW.IntSlider(description='probe')",
                                       metadata={"slideshow": {"slide_type": "slide"}})
    nb = nbformat.v4.new_notebook(cells=[title, widget], metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "rise": slide_metadata.RISE})
    nbformat.write(nb, folder / "rise_check.ipynb")
    return "rise_check.ipynb"


@pytest.fixture(scope="module")
def rise_page(tmp_path_factory):
    """The RISE slideshow of a two-slide notebook, served by JupyterLab, seen offline."""
    root = tmp_path_factory.mktemp("rise")
    name = _rise_notebook(root)
    state = tmp_path_factory.mktemp("rise-lab")
    lab = browser.JupyterLab(root, state).start()
    try:
        with browser.offline_chromium(state / "chromium") as (context, blocked):
            page = context.new_page()
            page.goto(f"{lab.url}/rise/{name}")
            page.wait_for_selector(".reveal .slides section.present", timeout=60_000)
            yield page, blocked
    finally:
        lab.stop()


@needs_browser
def test_rise_slideshow_renders_slides_and_math_offline(rise_page):
    page, blocked = rise_page
    assert "rise check" in page.locator(".reveal .slides section.present").first.inner_text().lower()
    page.wait_for_selector("mjx-container", timeout=30_000)  # RISE bundles MathJax 3
    assert not blocked, f"RISE reached for the network: {blocked}"


@needs_browser
@pytest.mark.xfail(strict=True, reason="jupyterlab-rise 0.43.1 with JupyterLab 4.6: the widget manager "
                   "does not load inside RISE (shared module @jupyterlab/console missing), so ipywidgets "
                   "show as text; present widget cells in the notebook view")
def test_rise_slideshow_renders_ipywidgets(rise_page):
    page, _ = rise_page
    page.keyboard.press("ArrowRight")
    page.locator(".reveal section.present .jp-CodeCell .cm-content").first.click()
    page.keyboard.press("Shift+Enter")
    page.wait_for_selector(".jp-OutputArea-output", timeout=60_000)
    page.wait_for_selector(".widget-slider", timeout=15_000)


def test_decks_show_an_explorers_static_fallback_and_drop_bare_widgets():
    import nbformat

    from course_utils.widgets import softmax_saturation
    box = softmax_saturation()
    explorer_output = nbformat.v4.new_output("display_data", data=box._repr_mimebundle_())
    bare = nbformat.v4.new_output("display_data", data={"text/plain": "IntSlider(value=0)",
                                                        export_slides.WIDGET_VIEW: {"model_id": "x"}})
    cell = nbformat.v4.new_code_cell("box", outputs=[explorer_output, bare])
    nb = nbformat.v4.new_notebook(cells=[cell], metadata={"widgets": {"state": {}}})
    out = export_slides.without_widgets(nb)
    assert "widgets" not in out.metadata and len(out.cells[0].outputs) == 1
    kept = out.cells[0].outputs[0]["data"]
    assert list(kept) == ["text/html"] and "static view (no kernel): d_k = 64" in kept["text/html"]
    assert len(cell.outputs) == 2  # the notebook itself is not changed
