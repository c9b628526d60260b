"""The bertviz views of course_utils.viz render with no internet (04_transformer)."""

import re
import subprocess
from pathlib import Path

import pytest
import torch

from browser import CHROMIUM, CHROMIUM_ARGS, missing_browser
from course_utils import viz

TOKENS = ["the", "cat", "sat", "on", "mat"]


@pytest.fixture(autouse=True)
def _fresh_session(monkeypatch):
    monkeypatch.setattr(viz, "_bertviz_state", {"views": 0, "libraries_sent": False})


def _attention(layers=2, heads=3, n=5, m=None):
    return torch.softmax(torch.randn(layers, heads, n, m or n) * 2, dim=-1)


def test_vendored_libraries_and_licences_ship_with_the_package():
    vendor = Path(viz.__file__).parent / "vendor"
    for name in ("d3-5.7.0.min.js", "d3-5.7.0.LICENSE", "jquery-2.2.4.min.js", "jquery-2.2.4.LICENSE.txt"):
        assert (vendor / name).stat().st_size > 500, name
    assert (vendor / "d3-5.7.0.min.js").read_text().startswith("// https://d3js.org v5.7.0")
    assert "jQuery v2.2.4" in (vendor / "jquery-2.2.4.min.js").read_text()[:100]


def test_html_loads_nothing_from_the_network_and_inlines_the_libraries():
    first = viz.head_view(_attention(), TOKENS).data
    second = viz.model_view(_attention(), TOKENS).data
    for html in (first, second):
        assert not re.search(r"<script[^>]*\bsrc\s*=", html), "no external scripts"
        assert not re.search(r"<link[^>]*https?://", html)
        assert "cdnjs" not in html and "require.config" not in html
    # the libraries travel once per session, in the first view
    assert "d3js.org v5.7.0" in first and "jQuery v2.2.4" in first
    assert "d3js.org v5.7.0" not in second and len(second) < len(first) / 5
    # numbered div ids (no random uuid): re-executed notebooks give the same HTML
    assert 'id="bertviz-course-1"' in first and 'id="bertviz-course-2"' in second
    assert not re.search(r"bertviz-[0-9a-f]{32}", first + second)
    forced = viz.head_view(_attention(), TOKENS, include_libraries=True).data
    assert "jQuery v2.2.4" in forced


def test_encoder_decoder_views_and_bad_shapes():
    html = viz.head_view(encoder_attention=_attention(n=4), decoder_attention=_attention(n=3),
                         cross_attention=_attention(n=3, m=4), encoder_tokens=list("abcd"),
                         decoder_tokens=list("xyz")).data
    assert "Encoder" in html and "Cross" in html
    with pytest.raises(ValueError, match=r"\(layers, heads, queries, keys\)"):
        viz.head_view(torch.rand(3, 5, 5), TOKENS)


def _render(tmp_path, html, *flags):
    page = tmp_path / "views.html"
    page.write_text(html)
    cmd = [str(CHROMIUM), "--headless", *CHROMIUM_ARGS, "--host-resolver-rules=MAP * ~NOTFOUND",
           "--virtual-time-budget=5000", f"--user-data-dir={tmp_path / 'profile'}", *flags, page.as_uri()]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


@pytest.mark.integration
@pytest.mark.skipif(not CHROMIUM.exists(), reason=str(missing_browser()))
def test_views_render_in_headless_chromium_with_the_network_off(tmp_path):
    page = viz.standalone_html(viz.head_view(_attention(), TOKENS), viz.model_view(_attention(), TOKENS))
    dom = _render(tmp_path, page, "--dump-dom").stdout
    # d3 drew the head view: the tokens as SVG text, one coloured checkbox per head
    head = dom.split('id="bertviz-course-1"')[1].split('id="bertviz-course-2"')[0]
    assert "<svg" in head
    for token in TOKENS:
        assert re.search(rf"<text[^>]*>{token}</text>", head), token
    assert len(re.findall(r'<rect[^>]*class="checkbox"', head)) >= 3 or head.count("<rect") >= 3
    # the model view drew one thumbnail per layer x head
    model = dom.split('id="bertviz-course-2"')[1]
    assert "<svg" in model and model.count("<line") > 2 * 3 * 5
    # and the screenshot is not blank
    shot = tmp_path / "views.png"
    _render(tmp_path, page, f"--screenshot={shot}", "--window-size=1000,900")
    import matplotlib.image
    pixels = matplotlib.image.imread(shot)[..., :3]
    assert (pixels.mean(-1) < 0.9).mean() > 0.02, "the page rendered (almost) nothing"
