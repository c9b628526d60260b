"""The course website (`make book`, scripts/build_book.py): built from the stored notebooks,
every page loads offline with no failed request and no console error, formulas are typeset,
figures and bertviz views are there, explorers show their static view, search finds a term
of 04, each chapter names its course_utils modules and offers its notebook for download,
links the repository, says how to run it and links its slide deck (built into the site);
every assignment in assignments/release/ has a students' page with its release notebook to
download and no solution; long code lines wrap instead of being cut."""

import re
from pathlib import Path

import pytest

from browser import CHROMIUM, SHOTS, offline_chromium

ROOT = Path(__file__).resolve().parent.parent
from scripts import build_book  # noqa: E402

from scripts import export_slides  # noqa: E402

CHAPTERS = [p.stem for p in export_slides.chapters()]
#: the chapters with an explorer (a widget whose static view the page shows)
def _has_explorer(path: Path) -> bool:
    """A widget output that carries its static view (text/html), as the course's explorers do
    (a library's progress bar carries none, and the site leaves it out)."""
    import json
    return any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) and "text/html" in o.get("data", {})
               for c in json.loads(path.read_text())["cells"] for o in c.get("outputs", []))


EXPLORERS = [p.stem for p in export_slides.chapters() if _has_explorer(p)]
#: hosts that stand for an address nobody has: no built page may name one
PLACEHOLDER_HOSTS = re.compile(r"\bexample\.(?:org|com|net)\b")
RELEASES = sorted(p.stem for p in (ROOT / "assignments" / "release").glob("*/*.ipynb") if p.stem == p.parent.name)
# the site built (Sphinx), and opened in Chromium: `make integration` (Makefile)
needs_site = pytest.mark.integration
needs_browser = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM}")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("book") / "book"
    index = build_book.build(out)
    assert index.exists()
    return out


def _pages(site):
    """The website's pages (not the slide decks in slides/: tests/test_slides.py opens those)."""
    return sorted(p for p in site.rglob("*.html") if "_static" not in p.parts and "slides" not in p.parts)


@needs_site
def test_every_page_is_there_and_loads_nothing_from_another_host(site):
    names = {p.relative_to(site).as_posix() for p in _pages(site)}
    expected = {"index.html", "api.html", "search.html", "run.html", "assignments/index.html",
                *(f"docs/{guide}.html" for guide in build_book.GUIDES)}
    assert expected | {f"notebooks/{c}.html" for c in CHAPTERS} | {f"assignments/{a}.html" for a in RELEASES} <= names
    for page in _pages(site):
        text = page.read_text()
        loads = re.findall(r"<(?:script|img|iframe|source)[^>]+src=[\"'](https?:)?//", text)
        styles = re.findall(r"<link[^>]+href=[\"'](?:https?:)?//[^\"']+[\"'][^>]*>", text)
        assert not loads and not [s for s in styles if "stylesheet" in s or "preload" in s], page
        assert "application/vnd.jupyter.widget-view+json" not in text and "unpkg.com" not in text, page
    for css in (site / "_static").rglob("*.css"):
        assert not re.search(r"url\(['\"]?(?:https?:)?//", css.read_text(errors="ignore")), css


@needs_site
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


@needs_site
def test_explorers_show_their_static_view_and_the_guides_are_on_the_site(site):
    for chapter in EXPLORERS:
        page = (site / "notebooks" / f"{chapter}.html").read_text()
        assert "static view (no kernel)" in page and "VBox(" not in page and "Explorer(children" not in page, chapter
    text = lambda name: re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", (site / name).read_text()))
    assert "make grade SUBMISSION=~/grading/a1_bahdanau/" in text("docs/LECTURERS.html")
    assert "make slides" in text("docs/PRESENTING.html") and "No points for the reference answer" in text("docs/GRADING.html")
    assert "--target-repo-dir /srv/course" in text("docs/HUB.html")
    # the guides link one another on the site as in the repository
    assert 'href="GRADING.html"' in (site / "docs" / "LECTURERS.html").read_text()


@needs_site
def test_every_chapter_says_how_to_run_it_and_links_its_deck_and_no_page_invents_an_address(site):
    url = build_book.repository_url()
    index = (site / "index.html").read_text()
    # the chapters are listed once, under one "Chapters" heading (the sidebar keeps its caption)
    article = index[index.index('<article class="bd-article"'):index.index("</article>")]
    assert article.count("<h2>Chapters<") == 1 and "caption-text" not in article
    assert index.count('caption-text">Chapters<') == 1
    # in the order they are taught (05_bert before 05b_bert_finetuning), in the sidebar too
    sidebar = re.findall(r'href="notebooks/(\w+)\.html"', index)
    assert list(dict.fromkeys(sidebar)) == CHAPTERS, sidebar
    for chapter in CHAPTERS:
        page = (site / "notebooks" / f"{chapter}.html").read_text()
        plain = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", page))
        assert "Run this chapter yourself" in plain, chapter
        assert f"notebooks/{chapter}.ipynb" in plain and 'href="../run.html"' in page, chapter
        assert (f"git clone {url}" in plain and f'href="{url}"' in page) if url else "from your lecturer" in plain, chapter
        assert f'href="../slides/{chapter}.html"' in page and (site / "slides" / f"{chapter}.html").exists()
        assert f'href="slides/{chapter}.html"' in index, chapter
        # what a lecture shows: no nbval marker in the code (the prose may name it), no cell of asserts only
        code = "".join(re.findall(r'<div class="cell_input.*?</pre>', page, re.S))
        assert code and "NBVAL_" not in code and not re.search(r"^\s*<span[^>]*>assert</span>", code, re.M), chapter
    slides = (site / "slides" / "index.html").read_text()
    assert all(f'href="{c}.html"' in slides for c in CHAPTERS) and 'href="../index.html"' in slides
    run = re.sub(r"<[^>]+>", "", (site / "run.html").read_text())
    pip_lines = [line for line in build_book.readme_pip_commands().splitlines() if "pip install" in line]
    assert pip_lines and all(line.strip() in run for line in pip_lines)  # README's own commands
    assert "make lab" in run and "JupyterHub" in run
    assert f"git clone {url}" in run if url else "Ask your lecturer" in run
    for page in site.rglob("*.html"):
        found = PLACEHOLDER_HOSTS.search(page.read_text(errors="ignore"))
        assert not found, f"{page.relative_to(site)} names a placeholder address: {found.group(0)}"


def test_the_address_comes_from_pyproject_and_reaches_every_box_when_set(tmp_path, monkeypatch):
    """Staged only (no Sphinx): with an address, the run page, each chapter's box, each
    assignment page and the footer name it; without one, none names any address."""
    import runpy
    monkeypatch.delenv("COURSE_REPOSITORY_URL", raising=False)
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n')
    assert export_slides.repository_url(pyproject) == ""
    pyproject.write_text('[project]\nname = "x"\n[project.urls]\nRepository = "https://git.uni.test/ml/attention"\n')
    assert export_slides.repository_url(pyproject) == "https://git.uni.test/ml/attention"
    for url in ("https://git.uni.test/ml/attention", ""):
        monkeypatch.setenv("COURSE_REPOSITORY_URL", url)
        src = build_book.stage(tmp_path / f"src{len(url)}")
        texts = [(src / "run.md").read_text(), (src / "_repository.md").read_text(),
                 *(p.read_text() for p in (src / "assignments").glob("a*.md"))]
        box = (src / "notebooks" / f"{CHAPTERS[0]}.ipynb").read_text()
        conf = runpy.run_path(str(src / "conf.py"))
        if url:
            assert all(f"git clone {url} attention-course" in t for t in [*texts, box])
            assert conf["html_theme_options"]["icon_links"][0]["url"] == url and url in conf["html_theme_options"]["extra_footer"]
        else:
            assert not any(re.search(r"https?://(?!download\.pytorch\.org)", t) for t in [texts[0], texts[1], box])
            assert "lecturer" in texts[0] and "lecturer" in box
            assert conf["html_theme_options"]["icon_links"] == [] and "lecturer" in conf["html_theme_options"]["extra_footer"]


def test_readme_without_the_install_markers_is_refused(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# A course\n\n```bash\npip install x\n```\n")
    with pytest.raises(ValueError, match="install-without-make markers"):
        build_book.readme_pip_commands(readme)


def _solution_lines(name: str) -> list[str]:
    """Distinctive lines of the reference solutions of assignment ``name``."""
    import nbformat
    nb = nbformat.read(ROOT / "assignments" / "source" / name / f"{name}.ipynb", as_version=4)
    lines = []
    for cell in nb.cells:
        for block in re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", cell.source, re.S):
            lines += [line.strip() for line in block.splitlines() if len(line.strip()) > 30]
    return lines


@needs_site
def test_a_students_page_per_assignment_with_its_release_notebook_and_no_solution(site):
    import html
    assert RELEASES, "no release notebooks in assignments/release/"
    overview = (site / "assignments" / "index.html").read_text()
    for name in RELEASES:
        assert f'href="{name}.html"' in overview, name
        page = (site / "assignments" / f"{name}.html").read_text()
        plain = html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", page)))
        assert "What you write" in plain and "How to hand it in" in plain and "How to work on it" in plain
        assert f"assignments/release/{name}/{name}.ipynb" in plain
        link = re.search(rf'href="(\.\./_downloads/[0-9a-f]+/{name}\.ipynb)"', page)
        assert link, f"{name}: no download link"
        download = (site / "assignments" / link.group(1)).resolve()
        release = ROOT / "assignments" / "release" / name / f"{name}.ipynb"
        assert download.read_bytes() == release.read_bytes(), f"{name}: the download is not the release notebook"
        solutions = _solution_lines(name) if (ROOT / "assignments" / "source" / name).exists() else []
        leaked = [line for line in solutions if html.escape(line, quote=False) in page or line in plain]
        assert not leaked, f"{name}: solution lines on the page: {leaked[:3]}"
    # a known answer: assignment 1, as the README's table says (12 points; what the student writes)
    if "a1_bahdanau" in RELEASES:
        info = build_book.assignment(ROOT / "assignments" / "release" / "a1_bahdanau" / "a1_bahdanau.ipynb")
        assert info["points"] == 12 and info["chapter"] == "02_bahdanau_attention"
        assert [w for p in info["parts"] for w in p["writes"]] == [
            "AdditiveAttention.forward", "AttentionSeq2Seq.decode_step", "loss_fn", "train_model"]
        assert [p["points"] for p in info["parts"]] == [3, 3, 2, 4]
        assert "bahdanau.pt" in info["submitting"]


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
@needs_site
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
        # long code lines wrap; wide outputs (tables, logs) scroll sideways; nothing is cut
        cut = page.evaluate("""() => [...document.querySelectorAll('div.cell pre')].filter(p => {
            const scrolls = ['auto', 'scroll'].includes(getComputedStyle(p).overflowX);
            const wraps = p.closest('.cell_input') && getComputedStyle(p).whiteSpace === 'pre-wrap';
            return p.closest('.cell_input') ? !(wraps && p.scrollWidth <= p.clientWidth + 1)
                                            : p.scrollWidth > p.clientWidth + 1 && !scrolls;
        }).map(p => p.innerText.slice(0, 40))""")
        assert not cut, f"code or output cut on 04: {cut[:3]}"
        _settle(page)
        page.screenshot(path=str(SHOTS / "book-04_transformer.png"))  # build/browser/, as the lab test
        if RELEASES:
            page.goto(f"{served}/assignments/{RELEASES[0]}.html")
            _settle(page)
            page.screenshot(path=str(SHOTS / f"book-{RELEASES[0]}.png"))
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
