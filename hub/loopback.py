"""A real JupyterHub on the loopback, laid out as the hub image lays the course (docs/HUB.md),
driven through a class's term: two students log in, run 00, keep their work across a restart;
a lecturer releases a1 through nbgrader's exchange, the students fetch and submit it, the
lecturer collects, `make grade` grades, the feedback goes back to each student's home and the
grades become Moodle and Canvas imports. Every step is checked; the figures (hub start, a
server's first start, memory per student server, a student's first notebook) are printed as
JSON and written to build/hub/loopback.json.

Run by tests/test_hub.py (`make hub-loopback`; in `make integration` once `make hub-venv` built the
hub's venv). Needs root (it creates local users and JupyterHub's LocalProcessSpawner starts
each server as its user), the hub's venv in build/hub/venv (the course's image: the locked
`dev` set on torch's CPU build, plus jupyterhub; never the course's .venv) and
configurable-http-proxy in build/hub/chp (npm); nothing leaves 127.0.0.1.

The layout, as in the image: the repository is copied to build/hub/run/srv/course (the
image's /srv/course; the servers import course_utils from there), each user's home is a new
empty folder (the persistent volume), and binder/start, run before each server as repo2docker's
entrypoint runs it, copies the notebooks into the home.
"""

from __future__ import annotations

import csv
import json
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
HUB = ROOT / "build" / "hub"
VENV = HUB / "venv"
CHP = HUB / "chp" / "node_modules" / ".bin" / "configurable-http-proxy"
RUN = HUB / "run"
COURSE = RUN / "srv" / "course"
EXCHANGE = RUN / "exchange"
ETC = RUN / "etc-jupyter"
STUDENTS = ["hubstudent1", "hubstudent2"]
LECTURER = "hublecturer"
COURSE_ID = "attention"
ASSIGNMENT = "a1_bahdanau"
#: what the copy of the repository leaves out (the image holds none of it)
SKIP = {".git", ".venv", ".venv-torch", "build", "checkpoints", "__pycache__", ".pytest_cache",
        ".ipynb_checkpoints", "scratch"}


def missing() -> str | None:
    """Why the loopback hub cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (local users; the spawner starts each server as its user)"
    if not (VENV / "bin" / "jupyterhub").exists():
        return f"no hub venv at {VENV} (make hub-venv builds it)"
    interpreter = (VENV / "bin" / "python").resolve()
    if any(not os.stat(d).st_mode & 0o001 for d in interpreter.parents):
        return (f"the hub venv's Python ({interpreter}) is in a folder other users cannot enter; "
                "rebuild it with HUB_PYTHON=/usr/bin/python3.11 (or another system Python)")
    if not CHP.exists():
        return f"no configurable-http-proxy at {CHP} (make hub-venv installs it with npm)"
    if not shutil.which("useradd") or not shutil.which("bwrap"):
        return "needs useradd and bwrap (the grader's sandbox)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def log(step: str, **figures) -> None:
    print(f"[hub] {step}" + (f" {json.dumps(figures)}" if figures else ""), flush=True)


def run_as(user: str, *cmd: str, cwd: Path, env: dict | None = None, timeout: int = 600) -> str:
    """``cmd`` as local user ``user`` (runuser), with the hub venv first on PATH."""
    base = {"PATH": f"{VENV}/bin:/usr/bin:/bin", "HOME": pwd.getpwnam(user).pw_dir, "USER": user,
            "JUPYTER_CONFIG_PATH": str(ETC), "PYTHONPATH": str(COURSE), "LANG": "C.UTF-8"}
    out = subprocess.run(["runuser", "-u", user, "--", "env", "-i", *(f"{k}={v}" for k, v in {**base, **(env or {})}.items()),
                          *cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if out.returncode:
        raise RuntimeError(f"{user}: {' '.join(cmd)} failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
    return out.stdout + out.stderr


# --- the layout ---------------------------------------------------------------------------

def kill_processes_of(user: str, signal: int) -> None:
    """End the processes of a user this harness created (its servers and kernels), by their ids."""
    out = subprocess.run(["ps", "-o", "pid=", "-u", user], capture_output=True, text=True).stdout
    for pid in out.split():
        try:
            os.kill(int(pid), signal)
        except ProcessLookupError:
            pass


def remove_users() -> None:
    for user in [*STUDENTS, LECTURER]:
        try:
            pwd.getpwnam(user)
        except KeyError:
            continue
        kill_processes_of(user, 9)
        subprocess.run(["userdel", "--remove", user], capture_output=True)


def lay_out() -> None:
    """The image's layout: the course in srv/course (readable by all), an empty home per user,
    the exchange, and the single-user servers' Jupyter config (nbgrader's course and exchange;
    the lecturer's parts of nbgrader off for students, as binder/jupyter-student does)."""
    remove_users()
    if RUN.exists():
        shutil.rmtree(RUN)
    shutil.copytree(ROOT, COURSE, symlinks=True, ignore=lambda d, names: [n for n in names if n in SKIP])
    for sub in ("build", ".cache"):   # what a notebook writes outside the home (per container in the image)
        (COURSE / sub).mkdir(exist_ok=True)
    subprocess.run(["chmod", "-R", "a+rX", str(RUN)], check=True)
    for sub in ("build", ".cache"):
        subprocess.run(["chmod", "-R", "a+rwX", str(COURSE / sub)], check=True)
        os.chmod(COURSE / sub, 0o1777)
    for path in (HUB, RUN):
        os.chmod(path, 0o755)
    (RUN / "home").mkdir()
    for user in [*STUDENTS, LECTURER]:
        subprocess.run(["useradd", "--create-home", "--home-dir", str(RUN / "home" / user),
                        "--shell", "/bin/bash", user], check=True)
    EXCHANGE.mkdir()
    os.chmod(EXCHANGE, 0o1777)
    (ETC / "labconfig").mkdir(parents=True)
    (ETC / "nbgrader_config.py").write_text(
        f"c = get_config()\nc.CourseDirectory.course_id = {COURSE_ID!r}\nc.Exchange.root = {str(EXCHANGE)!r}\n")
    page = json.loads((ROOT / "binder" / "jupyter-student" / "labconfig" / "page_config.json").read_text())
    for keep in ("@jupyter/nbgrader:assignment-list", "@jupyter/nbgrader:menu"):   # fetch and submit stay
        page["disabledExtensions"].pop(keep, None)
    (ETC / "labconfig" / "page_config.json").write_text(json.dumps(page, indent=1))
    (ETC / "jupyter_server_config.json").write_text(json.dumps({"ServerApp": {"jpserver_extensions": {
        "nbgrader.server_extensions.formgrader": False, "nbgrader.server_extensions.course_list": False}}}))
    subprocess.run(["chmod", "-R", "a+rX", str(ETC), str(RUN / "srv")], check=True)


def hub_config(port: int, hub_port: int, api_port: int, password: str, token: str) -> Path:
    config = RUN / "jupyterhub_config.py"
    env = {"PATH": f"{VENV}/bin:/usr/bin:/bin", "PYTHONPATH": str(COURSE), "JUPYTER_CONFIG_PATH": str(ETC),
           "COURSE_PROFILE": "fast", "COURSE_NUM_THREADS": "1", "LANG": "C.UTF-8"}
    config.write_text(f"""c = get_config()
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.ConfigurableHTTPProxy.command = [{str(CHP)!r}]
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{api_port}"
c.JupyterHub.db_url = "sqlite:///{RUN}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "{RUN}/jupyterhub_cookie_secret"
c.JupyterHub.pid_file = "{RUN}/jupyterhub.pid"
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = {password!r}
c.Authenticator.allowed_users = {set([*STUDENTS, LECTURER])!r}
c.Authenticator.admin_users = {{{LECTURER!r}}}
c.JupyterHub.spawner_class = "localprocess"
# repo2docker's entrypoint runs binder/start before the server; here the spawner does
c.Spawner.cmd = [{str(COURSE / "binder" / "start")!r}, {str(VENV / "bin" / "jupyterhub-singleuser")!r}]
c.Spawner.notebook_dir = "~"
c.Spawner.default_url = "/lab/tree/notebooks"
c.Spawner.environment = {env!r}
c.Spawner.start_timeout = 300
c.Spawner.http_timeout = 300
c.JupyterHub.services = [{{"name": "harness", "api_token": {token!r}}}]
c.JupyterHub.load_roles = [{{"name": "harness", "services": ["harness"],
                            "scopes": ["admin:users", "admin:servers", "tokens", "access:servers", "list:users"]}}]
""")
    os.chmod(config, 0o600)
    return config


# --- talking to the hub and the servers ---------------------------------------------------

class Hub:
    def __init__(self, url: str, token: str):
        self.url, self.token = url, token
        self.api = requests.Session()
        self.api.headers["Authorization"] = f"token {token}"
        self.user_tokens: dict[str, str] = {}

    def get(self, path, **kw):
        r = self.api.get(f"{self.url}/hub/api{path}", timeout=60, **kw)
        r.raise_for_status()
        return r.json()

    def login(self, user: str, password: str) -> requests.Session:
        """The login form, as a browser fills it in: the hub's cookie afterwards."""
        s = requests.Session()
        page = s.get(f"{self.url}/hub/login", timeout=60)
        page.raise_for_status()
        xsrf = s.cookies.get("_xsrf")
        r = s.post(f"{self.url}/hub/login?next=", data={"username": user, "password": password, "_xsrf": xsrf},
                   allow_redirects=False, timeout=60)
        assert r.status_code == 302, f"{user}: login answered {r.status_code}"
        other = requests.Session()
        other.get(f"{self.url}/hub/login", timeout=60)
        bad = other.post(f"{self.url}/hub/login?next=", allow_redirects=False, timeout=60,
                         data={"username": user, "password": "wrong", "_xsrf": other.cookies.get("_xsrf")})
        assert bad.status_code == 403 and "Invalid username or password" in bad.text, (bad.status_code, bad.text[-300:])
        return s

    def start(self, user: str) -> float:
        """Start ``user``'s server and wait until it answers; the seconds it took."""
        started = time.perf_counter()
        r = self.api.post(f"{self.url}/hub/api/users/{user}/server", timeout=60)
        assert r.status_code in (201, 202), (user, r.status_code, r.text)
        while True:
            info = self.get(f"/users/{user}")
            server = info.get("servers", {}).get("", {})
            if server.get("ready"):
                return time.perf_counter() - started
            if time.perf_counter() - started > 300:
                raise TimeoutError(f"{user}'s server did not start in 300 s: {info}")
            time.sleep(0.5)

    def stop(self, user: str) -> None:
        r = self.api.delete(f"{self.url}/hub/api/users/{user}/server", timeout=60)
        assert r.status_code in (202, 204), (user, r.status_code, r.text)
        while self.get(f"/users/{user}").get("servers", {}).get(""):
            time.sleep(0.5)

    def server(self, user: str) -> requests.Session:
        """A session on ``user``'s single-user server, with a token of that user's."""
        if user not in self.user_tokens:
            r = self.api.post(f"{self.url}/hub/api/users/{user}/tokens", json={"note": "loopback"}, timeout=60)
            r.raise_for_status()
            self.user_tokens[user] = r.json()["token"]
        s = requests.Session()
        s.headers["Authorization"] = f"token {self.user_tokens[user]}"
        return s

    def user_url(self, user: str, path: str) -> str:
        return f"{self.url}/user/{user}/{path.lstrip('/')}"


def execute_notebook(hub: Hub, user: str, path: str, timeout: float = 900) -> dict:
    """Run every code cell of ``path`` (in ``user``'s home) in a kernel of their server, over
    the kernel's websocket as JupyterLab does; the cells' errors and the seconds it took."""
    import asyncio
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect
    s = hub.server(user)
    model = s.get(hub.user_url(user, f"api/contents/{path}"), timeout=60)
    model.raise_for_status()
    cells = [c for c in model.json()["content"]["cells"] if c["cell_type"] == "code"]
    r = s.post(hub.user_url(user, "api/sessions"), json={"path": path, "type": "notebook", "kernel": {"name": "python3"}},
               timeout=120)
    r.raise_for_status()
    kernel = r.json()["kernel"]["id"]
    ws_url = hub.user_url(user, f"api/kernels/{kernel}/channels").replace("http://", "ws://")
    session = uuid.uuid4().hex

    async def run() -> dict:
        conn = await websocket_connect(HTTPRequest(ws_url, headers={"Authorization": f"token {hub.user_tokens[user]}"}))
        errors, started = [], time.perf_counter()
        for cell in cells:
            source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            msg_id = uuid.uuid4().hex
            await conn.write_message(json.dumps({
                "header": {"msg_id": msg_id, "username": user, "session": session, "msg_type": "execute_request",
                           "version": "5.3", "date": ""},
                "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                "content": {"code": source, "silent": False, "store_history": True, "user_expressions": {},
                            "allow_stdin": False, "stop_on_error": True}}))
            while True:
                raw = await asyncio.wait_for(conn.read_message(), timeout=max(1.0, timeout - (time.perf_counter() - started)))
                if raw is None:
                    raise RuntimeError("the kernel's websocket closed")
                msg = json.loads(raw)
                if msg.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                if msg["msg_type"] == "error":
                    errors.append(f"{msg['content']['ename']}: {msg['content']['evalue']}")
                if msg["channel"] == "shell" and msg["msg_type"] == "execute_reply":
                    break
            if errors:
                break
        conn.close()
        return {"errors": errors, "seconds": time.perf_counter() - started, "cells": len(cells)}

    result = asyncio.run(run())
    result["kernel"] = kernel
    return result


def in_chromium(url: str, password: str) -> str:
    """Each student in Chromium (tests/browser.py's offline context: nothing but 127.0.0.1):
    the hub's login form, JupyterLab on their notebooks/, 00 opened from the file browser,
    drawn, its kernel started and idle.
    Screenshots in build/hub/<student>-*.png. Skipped, and said so, without /usr/bin/chromium."""
    sys.path.insert(0, str(ROOT / "tests"))
    import browser
    if browser.missing_browser():
        log("browser step skipped", reason=str(browser.missing_browser()))
        return f"skipped: {browser.missing_browser()}"
    for user in STUDENTS:
        with browser.offline_chromium(RUN / f"chromium-{user}") as (context, blocked):
            page = context.new_page()
            page.goto(f"{url}/hub/login")
            page.fill("input[name=username]", user)
            page.fill("input[name=password]", password)
            page.click("input[type=submit], button[type=submit]")
            page.wait_for_url(f"**/user/{user}/lab/tree/notebooks**", timeout=120_000)
            item = page.locator(".jp-DirListing-item", has_text="00_welcome.ipynb")
            item.wait_for(timeout=120_000)
            page.screenshot(path=str(HUB / f"{user}-lab.png"))
            item.dblclick()
            # the notebook drawn (its title rendered) and its kernel started and idle
            page.wait_for_selector(".jp-NotebookPanel .jp-RenderedMarkdown h1", timeout=120_000)
            page.wait_for_selector(".jp-NotebookPanel .jp-Notebook-ExecutionIndicator[data-status='idle']",
                                   timeout=180_000)
            assert "00" in page.locator(".jp-NotebookPanel .jp-RenderedMarkdown h1").first.inner_text()
            page.screenshot(path=str(HUB / f"{user}-00.png"))
            # the image's JupyterLab defaults (binder/overrides.json): no question about news
            assert not page.get_by_text("notified about official Jupyter news").count(), f"{user}: news pop-up"
            assert not page.locator("text=Formgrader").count(), f"{user}: the lecturer's Formgrader is in the menu"
            assert not blocked, blocked[:5]
    log("students in Chromium")
    return "ok"


def server_memory_mib(user: str) -> float:
    """Resident memory of every process of ``user`` (their server and its kernels), in MiB."""
    out = subprocess.run(["ps", "-o", "rss=", "-u", user], capture_output=True, text=True).stdout
    return sum(int(x) for x in out.split()) / 1024


def nbgrader_action(hub: Hub, user: str, action: str) -> list:
    s = hub.server(user)
    r = s.post(hub.user_url(user, f"assignments/{action}"), data={"course_id": COURSE_ID, "assignment_id": ASSIGNMENT},
               timeout=300)
    r.raise_for_status()
    answer = r.json()
    assert isinstance(answer, dict) and answer.get("success") is True, (user, action, answer)
    return answer["value"]   # the assignments the student's server lists: {"assignment_id": ..., "status": ...}


# --- the term -----------------------------------------------------------------------------

def term(keep: bool = False) -> dict:
    """Everything above, checked step by step; returns the figures."""
    reason = missing()
    if reason:
        raise SystemExit(f"loopback hub: {reason}")
    figures: dict = {}
    lay_out()
    port, hub_port, api_port = free_port(), free_port(), free_port()
    password, token = secrets.token_urlsafe(12), secrets.token_hex(32)
    config = hub_config(port, hub_port, api_port, password, token)
    url = f"http://127.0.0.1:{port}"
    hub_log = open(RUN / "jupyterhub.log", "w")
    started = time.perf_counter()
    proc = subprocess.Popen([str(VENV / "bin" / "jupyterhub"), "-f", str(config)], cwd=RUN,
                            stdout=hub_log, stderr=subprocess.STDOUT,
                            env={"PATH": f"{VENV}/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}, start_new_session=True)
    try:
        hub = Hub(url, token)
        while True:
            try:
                if requests.get(f"{url}/hub/api", timeout=5).ok:
                    break
            except requests.ConnectionError:
                pass
            assert proc.poll() is None, (RUN / "jupyterhub.log").read_text()[-3000:]
            assert time.perf_counter() - started < 120, "the hub did not answer in 120 s"
            time.sleep(0.2)
        figures["hub_start_s"] = round(time.perf_counter() - started, 1)
        log("hub up", seconds=figures["hub_start_s"])

        # students log in through the form, their servers start, binder/start copied the course in
        for user in STUDENTS:
            hub.login(user, password)
        figures["first_start_s"] = {u: round(hub.start(u), 1) for u in STUDENTS}
        log("servers up", **figures["first_start_s"])
        for user in STUDENTS:
            home = Path(pwd.getpwnam(user).pw_dir)
            assert (home / "notebooks" / "00_welcome.ipynb").exists(), f"{user}: binder/start copied no notebooks"
            assert (home / "assignments" / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").exists()
            assert (home / "notebooks" / "00_welcome.ipynb").stat().st_uid == pwd.getpwnam(user).pw_uid
            page = hub.server(user).get(hub.user_url(user, "lab/tree/notebooks"), timeout=120)
            assert page.ok and "disabledExtensions" in page.text, page.status_code
            assert "@jupyter/nbgrader:formgrader" in page.text      # the lecturer's panel is off for students
            assert hub.server(user).get(hub.user_url(user, "formgrader"), timeout=60).status_code == 404
        figures["idle_server_mib"] = {u: round(server_memory_mib(u)) for u in STUDENTS}
        figures["browser"] = in_chromium(url, password)

        # 00 through the hub, both students at once is what a lecture does; one after the other here
        figures["notebook_00"] = {}
        for user in STUDENTS:
            result = execute_notebook(hub, user, "notebooks/00_welcome.ipynb")
            assert not result["errors"], (user, result["errors"])
            figures["notebook_00"][user] = {"seconds": round(result["seconds"], 1), "cells": result["cells"],
                                            "memory_mib": round(server_memory_mib(user))}
        log("00 ran", **figures["notebook_00"])

        # the student's work survives a restart (and the next start's copy does not overwrite it)
        user = STUDENTS[0]
        s = hub.server(user)
        nb = s.get(hub.user_url(user, "api/contents/notebooks/00_welcome.ipynb"), timeout=60).json()
        nb["content"]["cells"].append({"cell_type": "markdown", "metadata": {}, "source": "my notes: kept"})
        r = s.put(hub.user_url(user, "api/contents/notebooks/00_welcome.ipynb"),
                  json={"type": "notebook", "format": "json", "content": nb["content"]}, timeout=60)
        r.raise_for_status()
        hub.stop(user)
        figures["restart_s"] = round(hub.start(user), 1)
        again = hub.server(user).get(hub.user_url(user, "api/contents/notebooks/00_welcome.ipynb"), timeout=60).json()
        assert again["content"]["cells"][-1]["source"] == "my notes: kept", "the student's edit was lost on restart"
        log("work kept across a restart", seconds=figures["restart_s"])

        # nbgrader's exchange: release, fetch, submit, collect
        lecturer_home = Path(pwd.getpwnam(LECTURER).pw_dir)
        course = lecturer_home / "course"
        run_as(LECTURER, "mkdir", "-p", str(course / "release"), cwd=lecturer_home)
        run_as(LECTURER, "cp", "-r", str(COURSE / "assignments" / "release" / ASSIGNMENT), str(course / "release") + "/",
               cwd=lecturer_home)
        run_as(LECTURER, "nbgrader", "release_assignment", ASSIGNMENT, cwd=course)
        assert (EXCHANGE / COURSE_ID / "outbound" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").exists()
        source = COURSE / "assignments" / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
        for k, user in enumerate(STUDENTS):
            listed = nbgrader_action(hub, user, "fetch")
            assert any(a["assignment_id"] == ASSIGNMENT for a in listed), listed
            home = Path(pwd.getpwnam(user).pw_dir)
            fetched = home / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
            assert fetched.exists(), f"{user}: fetch put nothing in {fetched.parent}"
            if k == 1:   # the second student hands in the worked answers (no checkpoint)
                r = hub.server(user).put(hub.user_url(user, f"api/contents/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"),
                                         json={"type": "notebook", "format": "json",
                                               "content": json.loads(source.read_text())}, timeout=60)
                r.raise_for_status()
            nbgrader_action(hub, user, "submit")
        run_as(LECTURER, "nbgrader", "collect", ASSIGNMENT, cwd=course)
        for user in STUDENTS:
            assert (course / "submitted" / user / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").exists(), user
        log("released, fetched, submitted, collected")

        # grade with the course's grader (`make grade`, the lecturer's venv), in the sandbox
        grading = lecturer_home / "grading" / ASSIGNMENT
        run_as(LECTURER, "python", str(ROOT / "hub" / "classroom.py"), "collect", ASSIGNMENT, "--course", str(course),
               "--to", str(grading), cwd=course)
        started = time.perf_counter()
        out = subprocess.run(["make", "--no-print-directory", "grade", f"SUBMISSION={grading}/"], cwd=ROOT,
                             capture_output=True, text=True, timeout=1200)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        figures["grade_s"] = round(time.perf_counter() - started, 1)
        with open(grading / "grades.csv", newline="") as f:
            rows = {r["student"]: r for r in csv.DictReader(f)}
        assert set(rows) == set(STUDENTS), rows
        totals = {u: float(rows[u]["total"] or 0) for u in STUDENTS}
        assert totals[STUDENTS[0]] == 0 and totals[STUDENTS[1]] > 0, totals   # unanswered 0; the answers score
        assert "no checkpoint" in rows[STUDENTS[1]]["flags"], rows[STUDENTS[1]]
        figures["totals"] = totals
        log("graded", seconds=figures["grade_s"], **totals)

        # feedback back to each student, through nbgrader's exchange
        subprocess.run(["chown", "-R", f"{LECTURER}:{LECTURER}", str(grading)], check=True)
        run_as(LECTURER, "python", str(ROOT / "hub" / "classroom.py"), "return", ASSIGNMENT, "--graded", str(grading),
               "--course", str(course), cwd=course)
        for user in STUDENTS:
            nbgrader_action(hub, user, "fetch_feedback")
            home = Path(pwd.getpwnam(user).pw_dir)
            got = list((home / ASSIGNMENT / "feedback").glob(f"*/{ASSIGNMENT}.html"))
            assert got, f"{user}: no feedback in {home / ASSIGNMENT / 'feedback'}"
            text = got[0].read_text()
            assert f"{totals[user]:g}" in text or f"{totals[user]:.1f}" in text, f"{user}: the feedback lacks the total"
            listing = hub.server(user).get(hub.user_url(user, f"api/contents/{ASSIGNMENT}/feedback"), timeout=60)
            assert listing.ok and listing.json()["content"], "JupyterLab does not list the feedback"
        log("feedback in each student's home")

        # grades for the learning platform
        run_as(LECTURER, "python", str(ROOT / "hub" / "classroom.py"), "lms", str(grading / "grades.csv"), cwd=course)
        with open(grading / "grades-moodle.csv", newline="") as f:
            moodle = list(csv.DictReader(f))
        with open(grading / "grades-canvas.csv", newline="") as f:
            canvas = list(csv.DictReader(f))
        assert {r["username"]: float(r[ASSIGNMENT]) for r in moodle} == totals
        assert {r["SIS Login ID"]: float(r[ASSIGNMENT]) for r in canvas} == totals
        assert list(canvas[0])[:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
        log("grades for Moodle and Canvas")
        (HUB / "loopback.json").write_text(json.dumps(figures, indent=1))
        return figures
    finally:
        for user in STUDENTS:
            try:
                hub.stop(user)
            except Exception:   # noqa: BLE001 - the hub may be down already; the users' processes go below
                pass
        os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
        hub_log.close()
        for user in [*STUDENTS, LECTURER]:   # what the hub started as these users, if anything is left
            kill_processes_of(user, 15)
        if not keep:
            time.sleep(1)
            remove_users()


if __name__ == "__main__":
    print(json.dumps(term(keep="--keep" in sys.argv), indent=1))
