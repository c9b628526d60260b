"""The course website (`make book`, scripts/build_book.py): built from the stored notebooks,
every page loads offline with no failed request and no console error, formulas are typeset,
figures and bertviz views are there, explorers show their static view, search finds a term
of 04, each chapter names its course_utils modules and offers its notebook for download."""

import re
import sys
from pathlib import Path

import pytest

from browser import CHROMIUM, SHOTS, offline_chromium

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import build_book  # noqa: E402

CHAPTERS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
needs_browser = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM}")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("book") / "book"
    index = build_book.build(out)
    assert index.exists()
    return out


def _pages(site):
    return sorted(p for p in site.rglob("*.html") if "_static" not in p.parts)


def test_every_page_is_there_and_loads_nothing_from_another_host(site):
    names = {p.relative_to(site).as_posix() for p in _pages(site)}
    expected = {"index.html", "assignments.html", "lecturers.html", "api.html", "search.html"}
    assert expected | {f"notebooks/{c}.html" for c in CHAPTERS} <= names
    for page in _pages(site):
        text = page.read_text()
        loads = re.findall(r"<(?:script|img|iframe|source)[^>]+src=[\"'](https?:)?//", text)
        styles = re.findall(r"<link[^>]+href=[\"'](?:https?:)?//[^\"']+[\"'][^>]*>", text)
        assert not loads and not [s for s in styles if "stylesheet" in s or "preload" in s], page
        assert "application/vnd.jupyter.widget-view+json" not in text and "unpkg.com" not in text, page
    for css in (site / "_static").rglob("*.css"):
        assert not re.search(r"url\(['\"]?(?:https?:)?//", css.read_text(errors="ignore")), css


def test_chapters_name_their_code_and_offer_the_notebook(site):
    for chapter in CHAPTERS:
        page = (site / "notebooks" / f"{chapter}.html").read_text()
        assert "The code of this chapter lives in" in page
        assert (site / "_sources" / "notebooks" / f"{chapter}.ipynb").exists()
        assert f"_sources/notebooks/{chapter}.ipynb" in page  # the download button
    page = (site / "notebooks" / "04_transformer.html").read_text()
    assert 'href="../api.html#module-course_utils.transformer"' in page
    api = (site / "api.html").read_text()
    assert 'id="course_utils.attention.scaled_dot_product_attention"' in api
    assert 'id="course_utils.attention.MultiHeadAttention"' in api
    assert "Taught in" in api


def test_explorers_show_their_static_view_and_the_lecturer_pages_come_from_the_readme(site):
    for chapter in CHAPTERS:
        page = (site / "notebooks" / f"{chapter}.html").read_text()
        assert "static view (no kernel)" in page and "VBox(" not in page and "Explorer(children" not in page, chapter
    text = lambda name: re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", (site / name).read_text()))
    assert "make grade SUBMISSION=path/to/folder/" in text("assignments.html")
    assert "make slides" in text("lecturers.html") and "No points for the reference answer" in text("assignments.html")


@pytest.fixture(scope="module")
def served(site):
    """The site on a local web server (as a lecturer would host it), its base URL."""
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


SETTLED = ("(!window.MathJax || !MathJax.Hub || (MathJax.Hub.queue.pending === 0 && MathJax.Hub.queue.running === 0))"
           " && document.fonts.status === 'loaded'")


def _settle(page):
    """Wait until the page and MathJax (which loads its parts and fonts later) are done."""
    page.wait_for_load_state("load")
    page.wait_for_function(SETTLED, timeout=30_000)
    page.wait_for_load_state("networkidle")


@needs_browser
def test_every_page_loads_offline_in_a_browser_with_math_figures_and_search(site, served, tmp_path):
    failures, errors = [], []
    with offline_chromium(tmp_path / "chromium") as (context, blocked):
        page = context.new_page()
        page.on("requestfailed", lambda r: failures.append(f"{r.url}: {r.failure}"))
        page.on("response", lambda r: failures.append(f"{r.url}: HTTP {r.status}") if r.status >= 400 else None)
        page.on("console", lambda m: errors.append(f"{page.url}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(f"{page.url}: {e}"))
        for path in _pages(site):
            page.goto(f"{served}/{path.relative_to(site).as_posix()}", wait_until="load")
        page.goto(f"{served}/index.html")
        _settle(page)
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "book-index.png"))
        page.goto(f"{served}/notebooks/04_transformer.html")
        # MathJax 2 from _static typesets every formula of the page
        page.wait_for_function("document.querySelectorAll('.MathJax_CHTML').length > 10 && "
                               "document.querySelectorAll('.MathJax_CHTML').length == "
                               "document.querySelectorAll('script[type^=\"math/tex\"]').length", timeout=30_000)
        drawn = page.evaluate("Array.from(document.images).filter(i => i.complete && i.naturalWidth > 0).length")
        assert drawn >= 10, f"{drawn} figures drawn on 04"
        page.wait_for_selector("[id^='bertviz-course-'] svg", timeout=30_000)
        _settle(page)
        page.screenshot(path=str(SHOTS / "book-04_transformer.png"))  # build/browser/, as the lab test
        for where in (f"{served}/search.html", (site / "search.html").as_uri()):  # hosted, and from disk
            page.goto(where + "?q=LayerNorm")
            page.wait_for_selector("#search-results li", timeout=30_000)
            found = page.locator("#search-results li a").evaluate_all("links => links.map(a => a.href)")
            assert any("04_transformer" in href for href in found), found
            _settle(page)
    # from disk the browser refuses the search's fetches of result snippets (file://), and
    # leaving a page aborts what MathJax was still loading (a missing file is an HTTP 404)
    failures = [f for f in failures if not f.startswith("file:") and not f.endswith("net::ERR_ABORTED")]
    errors = [e for e in errors if not e.startswith("file:")]
    assert not blocked and not failures, (blocked[:5], failures[:5])
    assert not errors, errors[:5]
