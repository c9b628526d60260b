"""Shared browser helpers for the tests that need a real browser: Debian's Chromium driven
by Playwright for Python with the network cut off, and a throw-away JupyterLab server.

Used by test_bertviz_offline.py (Chromium on the command line), test_browser_*.py
(the notebooks run in JupyterLab) and test_slides.py (exported decks, RISE).
Never runs `playwright install`: the browser is /usr/bin/chromium (`apt-get install chromium`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

import course_utils  # KERNEL_ENV: the settings every kernel the course starts runs under
from course_utils.runtime import SMOKE_EVAL_DEFAULT
from course_utils.files import chapters

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"
BUILD = REPO / "build"
CHROMIUM = Path(os.environ.get("COURSE_CHROMIUM", "/usr/bin/chromium"))

#: Flags for a headless Chromium that phones nobody (no updates, sync or first-run pages).
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-dev-shm-usage"]
LOCAL_HOSTS = ("127.0.0.1", "localhost")


def missing_browser() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    if not CHROMIUM.exists():
        return (f"no Chromium at {CHROMIUM}: install it with `apt-get install chromium` "
                "(.ci/run does) to run the browser tests")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the Python package playwright is missing (`make install` installs the test extras)"
    return None


@contextmanager
def offline_chromium(profile_dir: Path, viewport=(1400, 1000)):
    """A headless Chromium context whose requests to anything but 127.0.0.1 are aborted;
    yields (context, blocked) where ``blocked`` lists the URLs that were stopped."""
    from playwright.sync_api import sync_playwright

    blocked: list[str] = []

    def guard(route):
        url = route.request.url
        host = urlparse(url).hostname
        if url.startswith(("file:", "data:", "blob:")) or host in LOCAL_HOSTS:
            route.continue_()
        else:
            blocked.append(url)
            route.abort("internetdisconnected")

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile_dir), executable_path=str(CHROMIUM), headless=True,
            args=CHROMIUM_ARGS + ["--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"],
            viewport={"width": viewport[0], "height": viewport[1]}, service_workers="block")
        context.route("**/*", guard)
        try:
            yield context, blocked
        finally:
            context.close()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: JupyterLab user settings for a test run: no news or update pop-ups, no autosave (the
#: notebooks run in a copy anyway), every cell in the DOM so that outputs can be counted.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
}


class JupyterLab:
    """A JupyterLab server on a free port of 127.0.0.1, no token, rooted at ``root``;
    started by ``start()`` and stopped by its PID in ``stop()``."""

    def __init__(self, root: Path, state: Path, env: dict | None = None):
        self.root, self.state = Path(root), Path(state)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {k: v for k, v in {**os.environ, **(env or {})}.items() if v is not None}  # None: unset
        self.process: subprocess.Popen | None = None
        self.log_path = self.state / "jupyterlab.log"

    def start(self, timeout: float = 120) -> "JupyterLab":
        settings = self.state / "user-settings"
        for plugin, values in LAB_SETTINGS.items():
            path = settings / f"{plugin}.jupyterlab-settings"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))
        for sub in ("runtime", "workspaces", "config", "data"):
            (self.state / sub).mkdir(parents=True, exist_ok=True)
        env = {**self.env, "JUPYTER_RUNTIME_DIR": str(self.state / "runtime"),
               "JUPYTER_DATA_DIR": str(self.state / "data"),
               "JUPYTERLAB_WORKSPACES_DIR": str(self.state / "workspaces")}
        cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root",
               f"--port={self.port}", "--port-retries=0", "--ip=127.0.0.1",
               "--ServerApp.token=", "--ServerApp.password=", "--ServerApp.disable_check_xsrf=True",
               f"--ServerApp.root_dir={self.root}", f"--LabApp.user_settings_dir={settings}",
               f"--LabApp.workspaces_dir={self.state / 'workspaces'}", "--LabApp.news_url=None",
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(cmd, cwd=self.root, env=env, stdout=self.log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.process.returncode}:\n{self.log_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/api/status", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"JupyterLab did not answer within {timeout} s:\n{self.log_text()[-3000:]}")

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        """Stop the server (and the kernels it started) by its process id."""
        if self.process is None:
            return
        pid = self.process.pid
        if self.process.poll() is None:
            os.kill(pid, signal.SIGTERM)  # the server shuts its kernels down on SIGTERM
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(pid, signal.SIGKILL)  # its own session: only what it started
                self.process.wait(timeout=10)
        self.log.close()
        self.process = None


def copy_notebooks(names, dest: Path) -> Path:
    """Copies of the notebooks in ``dest`` (the browser runs them there, never in place)."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copy2(NOTEBOOKS / name, dest / name)
    return dest


def code_cell_count(notebook: Path) -> int:
    cells = json.loads(notebook.read_text())["cells"]
    return sum(c["cell_type"] == "code" for c in cells)


def stored_image_count(notebook: Path) -> int:
    """How many PNG figures the committed notebook shows (the browser run must show them too)."""
    cells = json.loads(notebook.read_text())["cells"]
    return sum("image/png" in out.get("data", {}) for c in cells if c["cell_type"] == "code"
               for out in c.get("outputs", []))


def slug(name: str) -> str:
    return re.sub(r"\.ipynb$", "", name)


# ---- the notebooks in JupyterLab (test_browser_*.py) ----

#: Rough single-thread seconds per notebook in the browser run (full profile, 2 steps per
#: run), by name: they share the notebooks out between the test files so that pytest-xdist
#: (--dist loadfile) balances, and set each notebook's time budget (five times this).
EXPECTED_SECONDS = {"00_welcome": 17, "01_seq2seq_bottleneck": 16, "02_bahdanau_attention": 49, "03_convs2s": 24,
                    "04_transformer": 79, "05_bert": 60, "05b_bert_finetuning": 70, "06_bpe": 66, "07_gpt": 50,
                    "07b_small_llm": 60, "08_vision_transformer": 45}


def expected_seconds(name: str, default: float) -> float:
    """A notebook's EXPECTED_SECONDS by its file name (``default`` for one not listed)."""
    return EXPECTED_SECONDS.get(Path(name).stem, default)


SHARDS = 3
SHOTS = BUILD / "browser"
# JupyterLab renders an exception like stderr; its text gives it away (a traceback, or
# IPython's short form for a SyntaxError: "SyntaxError: ..." at the start of a line).
STDERR = ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
ERROR_TEXT = re.compile(r"Traceback \(most recent call last\)|^\w*(Error|Exception)\b", re.M)


def all_notebooks() -> list[str]:
    return [p.name for p in chapters(NOTEBOOKS)]


def shard(index: int, count: int = SHARDS) -> list[str]:
    """The notebooks of test file ``index`` of ``count``: longest first, each to the
    least loaded file (every notebook found by the glob lands in exactly one file)."""
    loads = [0.0] * count
    owner = {}
    for name in sorted(all_notebooks(), key=lambda n: (-expected_seconds(n, 120), n)):
        k = loads.index(min(loads))
        owner[name] = k
        loads[k] += expected_seconds(name, 120)
    return sorted(n for n, k in owner.items() if k == index)


def widget_models(notebook: Path) -> dict[str, int]:
    """Count of each ipywidgets model in the notebook's stored widget state."""
    state = json.loads(notebook.read_text())["metadata"].get("widgets", {})
    models = state.get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    counts: dict[str, int] = {}
    for m in models.values():
        counts[m["model_name"]] = counts.get(m["model_name"], 0) + 1
    return counts


def stored_bertviz_views(notebook: Path) -> int:
    cells = json.loads(notebook.read_text())["cells"]
    return sum("bertviz-course-" in "".join(out.get("data", {}).get("text/html", ""))
               for c in cells if c["cell_type"] == "code" for out in c.get("outputs", []))


def error_outputs(page) -> list[str]:
    """The texts of the error outputs (exceptions) shown in the page."""
    return [t for t in page.locator(STDERR).all_inner_texts() if ERROR_TEXT.search(t)]


def _wait(predicate, timeout: float, what: str, poll: float = 1.0, fail=None):
    """Poll ``predicate()`` until truthy; ``fail()`` may return a message to stop early."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if fail is not None and (message := fail()):
            raise AssertionError(message)
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def open_notebook(page, lab: JupyterLab, name: str) -> None:
    """Open ``name`` in JupyterLab and wait until its kernel is idle."""
    # a workspace of its own, reset: no tabs (and kernels) of earlier notebooks come back
    page.goto(f"{lab.url}/lab/workspaces/{slug(name)}/tree/{name}?reset", wait_until="domcontentloaded")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
    select_kernel = page.locator(".jp-Dialog button", has_text=re.compile(r"^Select$"))
    idle = page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")
    _wait(lambda: idle.count() or (select_kernel.count() and select_kernel.first.click() and False),
          120, f"the kernel of {name} to start", poll=0.5)


def shut_down_kernels(lab: JupyterLab) -> None:
    """Delete every session (and its kernel) through the REST API."""
    with urllib.request.urlopen(f"{lab.url}/api/sessions", timeout=10) as r:
        sessions = json.load(r)
    for s in sessions:
        req = urllib.request.Request(f"{lab.url}/api/sessions/{s['id']}", method="DELETE")
        urllib.request.urlopen(req, timeout=30).close()


#: seconds of idle kernels with cells left that count as a stalled run (polled once a second)
STALL_S = 30


class RunStalled(AssertionError):
    """Run All stopped making progress with every kernel idle (retried once)."""


def kernels_idle(lab: JupyterLab) -> bool:
    """Whether the server has kernels and every one is idle (REST API). A failed request
    counts as "not known to be idle": the server answered /api/kernels with HTTP 500 once,
    in the middle of a run that then had to fail the test for it (the stall check is only a
    shortcut; a run that does not finish still fails at its time limit, with its cells named)."""
    try:
        with urllib.request.urlopen(f"{lab.url}/api/kernels", timeout=10) as r:
            kernels = json.load(r)
    except (urllib.error.URLError, TimeoutError, ValueError):   # HTTPError is a URLError
        return False
    return bool(kernels) and all(k.get("execution_state") == "idle" for k in kernels)


def run_all_cells(page, name: str, n_code: int, timeout: float, lab: JupyterLab) -> float:
    """Run > Run All Cells; wait until every code cell has an execution count and the
    kernel is idle; return the wall time in seconds. Stops early on an error output, and
    with ``RunStalled`` when ``lab``'s kernels stay idle for ``STALL_S`` s with cells left."""
    prompts = page.locator(".jp-CodeCell .jp-InputArea-prompt")
    # the stored outputs and execution counts go first, so that all that is seen is new
    cleared = lambda: (not any(re.search(r"\[\d+\]", t) for t in prompts.all_inner_texts())
                       and page.locator(".jp-OutputArea-output").count() == 0)
    for attempt in range(3):  # a menu click is now and then lost while the page settles
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Edit$")).click()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Clear Outputs of All Cells$")).click()
        try:
            _wait(cleared, 10, "the stored outputs to clear", poll=0.3)
            break
        except AssertionError:
            page.keyboard.press("Escape")
            if attempt == 2:
                raise
    start = time.monotonic()
    for attempt in range(3):
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
        try:  # a click while the kernel still connects can be lost: then click again
            _wait(lambda: any(re.search(r"\[(\*|\d+)\]", t) for t in prompts.all_inner_texts()),
                  30, "the first cell to start", poll=0.5)
            break
        except AssertionError:
            if attempt == 2:
                raise

    state = {}

    def done():
        texts = prompts.all_inner_texts()
        state["executed"] = sum(bool(re.fullmatch(r"\s*\[\d+\]:\s*", t)) for t in texts)
        state["prompts"] = len(texts)
        state["busy"] = page.locator(".jp-Notebook-ExecutionIndicator[data-status='busy']").count()
        return state["executed"] == n_code and not state["busy"]

    def failed():
        errors = error_outputs(page)
        return f"{name}: an error output appeared:\n{errors[0][-3000:]}" if errors else None

    idle_polls = 0

    def failed_or_stalled():
        nonlocal idle_polls
        message = failed()
        if message:
            return message
        # the run stalled: every kernel idle for STALL_S s while cells are left (a start-up
        # race of JupyterLab that leaves the page on a kernel that was shut down: seen once)
        idle_polls = idle_polls + 1 if kernels_idle(lab) else 0
        if idle_polls >= STALL_S:
            raise RunStalled(f"{name}: {state.get('executed')} of {n_code} cells ran, then every "
                             f"kernel stayed idle for {STALL_S} s")
        return None

    try:
        _wait(done, timeout, f"all {n_code} code cells of {name} to run", fail=failed_or_stalled)
    except RunStalled:
        raise
    except AssertionError as err:
        raise AssertionError(f"{err} (last seen: {state})") from None
    return time.monotonic() - start


def _view_text(box) -> str:
    return box.locator(".widget-html-content").first.inner_text()


def _drag_slider(page, box, to_right: bool, index: int = 0) -> None:
    """Drag the handle of the box's slider ``index`` with the mouse to one end of its track."""
    slider = box.locator(".widget-slider").nth(index)
    track = slider.locator(".noUi-target").first.bounding_box()
    handle = slider.locator(".noUi-handle").last.bounding_box()  # a range slider: its upper end
    assert track and handle, "the slider is not visible"
    x0, y = handle["x"] + handle["width"] / 2, handle["y"] + handle["height"] / 2
    x1 = track["x"] + track["width"] + 5 if to_right else track["x"] - 5
    page.mouse.move(x0, y)
    page.mouse.down()
    page.mouse.move((x0 + x1) / 2, y, steps=5)
    page.mouse.move(x1, y, steps=5)
    page.mouse.up()


def _changes_view(page, box, action, what: str) -> str:
    before = _view_text(box)
    action()
    _wait(lambda: _view_text(box) != before, 20, f"the view to follow {what}", poll=0.2)
    after = _view_text(box)
    return f"{what}: the view changed ({before[:45]!r} -> {after[:45]!r})"


def exercise_widget_boxes(page, name: str) -> list[str]:
    """The course's widget boxes (a VBox of controls over an HTML view): pick the last
    drop-down entry, type a sentence + Enter into a text box, drag the first slider with the
    mouse to one end and back to the other and every other slider to its farther end; each
    must change the view. Returns one line per interaction."""
    done = []
    boxes = page.locator(".jp-OutputArea-output .widget-vbox:has(.widget-slider):has(.widget-html)")
    for i in range(boxes.count()):
        box = boxes.nth(i)
        box.scroll_into_view_if_needed()
        select = box.locator(".widget-dropdown select")
        if select.count():
            n = select.first.locator("option").count()
            assert n > 1, f"{name}: the drop-down has {n} entries"
            done.append(_changes_view(page, box, lambda: select.first.select_option(index=n - 1),
                                      f"{name}: drop-down -> entry {n - 1}"))
        text = box.locator(".widget-text input[type='text']")
        if text.count():
            def type_sentence():
                text.first.fill("Attention is all you need")
                text.first.press("Enter")
            done.append(_changes_view(page, box, type_sentence, f"{name}: typed a sentence + Enter"))
        for k in range(box.locator(".widget-slider").count()):
            slider = box.locator(".widget-slider").nth(k)
            # a slider whose range holds one value cannot move (01's step slider when the beam
            # ends at its first step, as an untrained model's may in a smoke run); the unit
            # tests check that such ranges follow the model (tests/test_widgets.py)
            low, high = (slider.locator(".noUi-handle").last.get_attribute(f"aria-value{end}") for end in ("min", "max"))
            if low is not None and low == high:
                done.append(f"{name}: slider {k} of box {i} has one value ({low}): nothing to drag")
                continue
            handle = slider.locator(".noUi-handle").last.bounding_box()  # a range slider: its upper end
            track = slider.locator(".noUi-target").first.bounding_box()
            at_left = handle["x"] + handle["width"] / 2 < track["x"] + track["width"] / 2
            for to_right in ((at_left, not at_left) if k == 0 else (at_left,)):
                done.append(_changes_view(
                    page, box, lambda: _drag_slider(page, box, to_right, k),
                    f"{name}: dragged slider {k} of box {i} towards its {'right' if to_right else 'left'} end"))
    return done


def check_bertviz_views(page, name: str, expected: int) -> list[str]:
    """Every bertviz view drew its SVG; a view with a drop-down (encoder / decoder / cross)
    redraws when it is switched; the head view reacts to hovering a token."""
    done = []
    views = page.locator(".jp-OutputArea-output [id^='bertviz-course-']")
    assert views.count() >= expected, f"{name}: {views.count()} bertviz views, expected {expected}"
    for i in range(views.count()):
        view = views.nth(i)
        view.scroll_into_view_if_needed()
        _wait(lambda: view.locator("svg text, svg line, svg rect").count() > 10, 30,
              f"{name}: bertviz view {i} to draw", poll=0.3)
        n_drawn = view.locator("svg text, svg line, svg rect").count()
        done.append(f"{name}: bertviz view {i} drew {n_drawn} SVG elements offline")
        filt = view.locator("select#filter")
        if filt.count():  # the head view of an encoder-decoder: encoder / decoder / cross
            # what is drawn: the head view's tokens and arcs, the model view's thumbnails
            words = lambda: view.evaluate("v => Array.from(v.querySelectorAll('svg'))"
                                          ".map(s => s.innerHTML).join('')")
            before = words()
            values = filt.locator("option").evaluate_all("os => os.map(o => o.value)")
            target = "cross" if "cross" in values else values[-1]
            filt.select_option(target)
            _wait(lambda: words() != before, 10,
                  f"{name}: the head view to switch to {target}", poll=0.2)
            done.append(f"{name}: bertviz view {i} switched to {target!r} (option value); its drawing changed")
        tokens = view.locator("svg .attentionBoxes ~ g text, svg text")
        if filt.count() and tokens.count():
            visible = view.locator("line[visibility='visible']")
            tokens.first.hover()
            page.wait_for_timeout(300)
            done.append(f"{name}: hovered a token in the head view ({visible.count()} lines shown)")
    return done


def check_images(page, name: str, expected: int) -> int:
    images = page.locator(".jp-OutputArea-output img")
    loaded = images.evaluate_all("imgs => imgs.filter(i => i.complete && i.naturalWidth > 50).length")
    assert loaded >= expected, f"{name}: {loaded} figures rendered, the stored notebook has {expected}"
    return loaded


def check_notebook_in_lab(context, lab: JupyterLab, name: str, shots: Path = SHOTS) -> dict:
    """Open a copy of notebook ``name`` in JupyterLab, run all cells, check it, save a
    screenshot to ``shots``; return a report (also written as JSON next to the screenshot)."""
    source = NOTEBOOKS / name
    page = context.new_page()
    page_errors: list[str] = []
    page.on("pageerror", lambda exc: page_errors.append(str(exc)[:300]))
    report = {"notebook": name}
    try:
        start = time.monotonic()
        open_notebook(page, lab, name)
        report["open_s"] = round(time.monotonic() - start, 1)
        n_code = code_cell_count(source)
        budget = max(300, 5 * expected_seconds(name, 180))
        try:
            report["run_all_s"] = round(run_all_cells(page, name, n_code, budget, lab), 1)
        except RunStalled as stalled:  # once: a fresh kernel and page
            report["retried"] = str(stalled)
            shut_down_kernels(lab)
            open_notebook(page, lab, name)
            report["run_all_s"] = round(run_all_cells(page, name, n_code, budget, lab), 1)
        assert not error_outputs(page), f"{name}: error outputs after Run All: {error_outputs(page)}"
        try:
            report["profile"] = check_profile_banner(page, name)
        except AssertionError as missing:
            # seen once in ~30 CI runs (01, first of its shard, on a loaded 2-core machine):
            # every cell had run, without errors, but the page showed no banner. Once: say
            # what the page showed, then a fresh kernel and page, and the check again.
            report["retried"] = f"{missing}; the page showed: {first_outputs(page)}"
            shut_down_kernels(lab)
            open_notebook(page, lab, name)
            report["run_all_s"] = round(run_all_cells(page, name, n_code, budget, lab), 1)
            report["profile"] = check_profile_banner(page, name)
        report["figures"] = check_images(page, name, stored_image_count(source))
        models = widget_models(source)
        sliders = models.get("IntSliderModel", 0) + models.get("FloatSliderModel", 0)
        report["widgets"] = exercise_widget_boxes(page, name)
        assert len([d for d in report["widgets"] if "slider" in d]) >= sliders, \
            f"{name}: {sliders} slider(s) stored but only {report['widgets']} exercised"
        report["bertviz"] = check_bertviz_views(page, name, stored_bertviz_views(source))
        # the screenshot: the first interactive view if any, else the last figure
        focus = page.locator(".jp-OutputArea-output [id^='bertviz-course-'], "
                             ".jp-OutputArea-output .widget-vbox:has(.widget-slider)")
        if focus.count() == 0:
            focus = page.locator(".jp-OutputArea-output img")
        if focus.count():
            (focus.first if "bertviz" in str(report["bertviz"]) or report["widgets"] else focus.last
             ).scroll_into_view_if_needed()
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shots / f"{slug(name)}.png"))
        report["page_errors"] = page_errors
        report["total_s"] = round(time.monotonic() - start, 1)
        return report
    except Exception:
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shots / f"{slug(name)}.FAILED.png"))
        raise
    finally:
        report["page_errors"] = page_errors
        shots.mkdir(parents=True, exist_ok=True)
        (shots / f"{slug(name)}.json").write_text(json.dumps(report, indent=1))
        page.close()
        shut_down_kernels(lab)


#: The browser run is also the full-profile smoke test (one execution, two checks): its
#: kernels run the ``full`` profile (its models and data) with ``COURSE_SMOKE_STEPS`` steps
#: per training run and soft asserts (scripts/softassert.py), so a notebook takes seconds, not
#: minutes. nbval already runs every notebook in the fast profile and checks its numbers;
#: the browser test checks what nbval cannot (rendering, widgets, offline views) and that
#: the full profile runs top to bottom. ``COURSE_BROWSER_PROFILE=fast`` and
#: ``COURSE_BROWSER_STEPS=0`` (train as the profile says) change that for ``make browser-test``.
BROWSER_PROFILE = os.environ.get("COURSE_BROWSER_PROFILE", "full")
BROWSER_STEPS = int(os.environ.get("COURSE_BROWSER_STEPS", "2"))
SMOKE_EVAL = SMOKE_EVAL_DEFAULT  # test examples per split in a step-capped run (COURSE_SMOKE_EVAL)
#: the device the step-capped run's kernels see: ``check``, the device check (a CUDA GPU
#: pretended on the CPU, scripts/device_check.py; ``COURSE_BROWSER_DEVICE=cpu`` turns it off),
#: or the ``COURSE_DEVICE`` to give them
DEVICE_CHECK = os.environ.get("COURSE_BROWSER_DEVICE", "check")


def runs_full_profile_smoke() -> bool:
    """Whether the browser test, as configured, also does the job of
    test_full_profile_smoke.py (which then skips)."""
    return missing_browser() is None and BROWSER_PROFILE == "full" and BROWSER_STEPS > 0


def first_outputs(page, cells: int = 3) -> str:
    """What the first ``cells`` code cells show (prompt and output text, shortened), and
    how many outputs the page has: the evidence when a check of the page fails."""
    shown = []
    for i in range(min(cells, page.locator(".jp-CodeCell").count())):
        cell = page.locator(".jp-CodeCell").nth(i)
        prompt = " ".join(cell.locator(".jp-InputArea-prompt").all_inner_texts()).strip()
        out = " | ".join(cell.locator(".jp-OutputArea-output").all_inner_texts())
        shown.append(f"cell {i} {prompt} {out[:160]!r}")
    return f"{page.locator('.jp-OutputArea-output').count()} outputs; " + "; ".join(shown)


def check_profile_banner(page, name: str) -> str:
    """The setup() banner in the page names the browser run's profile and step cap."""
    text = lambda: "\n".join(page.locator(".jp-OutputArea-output").all_inner_texts())
    try:  # the last outputs may still be drawing
        _wait(lambda: f"profile: {BROWSER_PROFILE}" in text(), 10, "the banner", poll=0.5)
    except AssertionError:
        raise AssertionError(f"{name}: setup() did not report profile {BROWSER_PROFILE}; "
                             f"the page shows {first_outputs(page)}") from None
    text = text()
    if BROWSER_STEPS > 0:
        assert f"SMOKE TEST: at most {BROWSER_STEPS} training steps" in text, \
            f"{name}: setup() did not see the step cap COURSE_SMOKE_STEPS={BROWSER_STEPS}"
        if DEVICE_CHECK == "check":   # cuda on this CPU: the kernel's start-up hook ran (else setup() fails)
            assert "device: cuda" in text, f"{name}: setup() did not run under the device check"
    return (f"profile {BROWSER_PROFILE}" + (f", {BROWSER_STEPS} steps per run" if BROWSER_STEPS else "")
            + (", under the device check" if BROWSER_STEPS and DEVICE_CHECK == "check" else ""))


def lab_session(names, tmp_path_factory):
    """Generator for a module fixture: JupyterLab on copies of ``names`` and an offline
    Chromium; yields (context, lab, blocked URLs); stops both at the end. Results the
    notebooks save go to a copy of results/, not to the repository's."""
    root = copy_notebooks(names, tmp_path_factory.mktemp("notebooks"))
    state = tmp_path_factory.mktemp("lab")
    results = state / "results"
    if (REPO / "results").exists():
        shutil.copytree(REPO / "results", results)
    # the browser run checks no stored numbers: its kernels take the native (fast) arithmetic
    # even when make test's portability guard set a foreign one (scripts/foreign_arithmetic.py)
    from scripts.foreign_arithmetic import GUARD_KEYS
    env = {**dict.fromkeys(GUARD_KEYS), "COURSE_PROFILE": BROWSER_PROFILE,
           "COURSE_NUM_THREADS": os.environ.get("COURSE_NUM_THREADS", "1"),
           **course_utils.KERNEL_ENV, "COURSE_RESULTS_DIR": str(results)}
    if BROWSER_STEPS > 0:
        from scripts.softassert import SOFT_ASSERTS
        startup = state / "ipython" / "profile_default" / "startup"
        startup.mkdir(parents=True)
        (startup / "00-soft-asserts.py").write_text(SOFT_ASSERTS)
        env.update(COURSE_SMOKE_STEPS=str(BROWSER_STEPS), COURSE_SMOKE_EVAL=str(SMOKE_EVAL),
                   IPYTHONDIR=str(state / "ipython"), COURSE_DEVICE=DEVICE_CHECK)
        if DEVICE_CHECK == "check":
            # ...and under the device check (scripts/device_check.py): its start-up file beside
            # the soft asserts' switches it on in every kernel JupyterLab starts (COURSE_DEVICE=cuda):
            # the full profile as on a CUDA GPU, every device mistake an error output, the
            # widgets' callbacks included (they run on a kernel subshell's thread, which the
            # check enters when the thread starts)
            from scripts.device_check import kernel_env
            env.update(kernel_env(state / "ipython"))
    lab = JupyterLab(root, state, env).start()
    try:
        with offline_chromium(state / "chromium") as (context, blocked):
            yield context, lab, blocked
    finally:
        lab.stop()


def shard_tests(index: int):
    """The module fixture ``lab`` and the test of shard ``index`` (one per
    test_browser_lab_*.py file, so that ``pytest --dist loadfile`` runs the shards on
    different workers): every notebook of the shard runs in JupyterLab, offline."""
    import pytest

    names = shard(index)

    @pytest.fixture(scope="module")
    def lab(tmp_path_factory):
        yield from lab_session(names, tmp_path_factory)

    @pytest.mark.skipif(bool(missing_browser()), reason=str(missing_browser()))
    @pytest.mark.parametrize("name", names)
    def test_notebook_runs_in_jupyterlab_offline(lab, name):
        context, server, blocked = lab
        report = check_notebook_in_lab(context, server, name)
        print(report)
        assert not report["page_errors"], f"{name}: uncaught errors in the page: {report['page_errors']}"
        assert not blocked, f"{name}: the page tried to reach the network: {blocked[:5]}"

    return lab, test_notebook_runs_in_jupyterlab_offline
