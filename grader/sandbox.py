"""Where a submission runs: a bubblewrap sandbox, started, limited and waited for by the grader.

The grader (``grader.run``) never runs a student's code in its own process. It writes the
notebook to run into a fresh work folder, and ``run_notebook`` starts the runner
(``grader.inside``, bound into the sandbox alone as ``IN_SANDBOX_CODE/grader_sandbox.py``) inside
``bwrap``:

- an unprivileged user of its own (a uid per sandbox when the grader runs as root, so that
  the process limit of one submission never touches another) that can make no user namespace
  (a seccomp filter, ``userns_filter``), a read-only view of the
  system and of what the course needs (the interpreter, its packages, ``course_utils/``,
  ``data/``) and nothing else: not the repository (solutions, hidden tests, reference
  checkpoints), not the folder of submissions, not the grader's files; a private ``/tmp``
  whose only shared part is the work folder; its own PID namespace (the grader's processes
  cannot be seen, so cannot be signalled) and no network; its work folder in its own
  size-limited tmpfs;
- limits (``prlimit``): address space per process, number of processes, size of any file
  written, CPU time; as root a cgroup per sandbox (``Cgroup``: one CPU's share, the memory of
  the whole sandbox, its processes, the CPU time the time limit counts); the runner caps the
  output it keeps per notebook; the grader kills the sandbox at the time limit, and every
  process in it dies with it (PID namespace).

What comes back is plain data, through a pipe that only the runner holds: the executed
notebook and the probes' answers (JSON, read with a size cap: ``_Reader``). Whether the sandbox
started is bwrap's own word (``--json-status-fd``), never a file the sandbox writes.

Leaves out: Docker (bubblewrap is the one sandbox here); without root, cgroup limits (the
per-process limits hold, and the time limit counts the sandbox's CPU time read from ``/proc``).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from grader import inside
from grader.inside import IN_KERNEL_MODULE, IN_SANDBOX_INPUT, IN_SANDBOX_WORK

INSTALL_HINT = ("bubblewrap (the `bwrap` command) is not installed: it is what keeps a submission from "
                "reaching the grader, the other submissions and the solutions. Install it "
                "(Debian/Ubuntu: `apt-get install bubblewrap`; Fedora: `dnf install bubblewrap`), or, for "
                "submissions you trust only, grade with --no-sandbox (every row is then flagged)")
NO_SANDBOX_FLAG = "not sandboxed (--no-sandbox)"
IN_SANDBOX_CODE = "/tmp/grader"    # the folder of the runner and the kernel's module, as the sandbox sees it
INSIDE_FILE = Path(inside.__file__).resolve()  # bound there as IN_KERNEL_MODULE.py


class SandboxError(Exception):
    """The sandbox cannot be started (bwrap missing or refused): the message says what to do."""


@dataclass
class Limits:
    """What one submission may use."""
    memory_bytes: int = 4 * 2**30     # address space per process (torch reserves a lot of it)
    processes: int = 128              # processes and threads of the sandbox's own user
    file_bytes: int = 64 * 2**20      # any one file written
    output_bytes: int = 2 * 2**20     # text and data the executed notebook keeps
    tmp_bytes: int = 512 * 2**20      # the private /tmp (a tmpfs: the work folder is in it)
    grace_seconds: float = 30.0       # after the time limit, before the whole sandbox is killed
    cpu_seconds: float = 3600         # CPU time of any one process (RLIMIT_CPU)
    sandbox_memory_bytes: int = 6 * 2**30  # the whole sandbox, its tmpfs included (with a cgroup)
    wall_factor: float = 4.0          # at most this wall time per second of CPU time (with a cgroup:
    # past the CPU-time limit, the wall clock runs on only by the time the sandbox waited for a CPU)


# --------------------------------------------------------------------------------------
# No user namespace inside the sandbox (a seccomp filter, for bwrap's --seccomp)
# --------------------------------------------------------------------------------------

CLONE_NEWUSER = 0x10000000
#: audit arch -> (unshare, clone, clone3, setns) system call numbers
_SYSCALLS = {0xC000003E: (272, 56, 435, 308),   # x86_64
             0x40000003: (310, 120, 435, 346),  # i386 (int 0x80 on x86_64)
             0xC00000B7: (97, 220, 435, 268)}   # aarch64


def userns_filter() -> bytes:
    """A classic BPF seccomp program (``struct sock_filter`` array) that refuses, with EPERM,
    ``unshare`` and ``clone`` with ``CLONE_NEWUSER`` and every ``setns``, and ``clone3`` with
    ENOSYS (its flags are in memory a filter cannot read: the C library then falls back to
    ``clone``); x86_64's x32 system calls are refused. Everything else is allowed. As root,
    bwrap cannot ``--disable-userns`` (that needs its own user namespace): this is what keeps a
    submission from making one, where it would hold every capability."""
    LD_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
    ALLOW, EPERM, ENOSYS = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38
    code: list = []  # (op, jt label or 0, jf label or 0, k); a label is a str resolved below
    labels: dict[str, int] = {}

    def at(label):
        labels[label] = len(code)

    code.append((LD_ABS, 0, 0, 4))  # seccomp_data.arch
    for arch in _SYSCALLS:
        code.append((JEQ, f"arch{arch}", 0, arch))
    code.append((RET, 0, 0, ALLOW))
    for arch, (unshare, clone, clone3, setns) in _SYSCALLS.items():
        at(f"arch{arch}")
        code.append((LD_ABS, 0, 0, 0))  # seccomp_data.nr
        if arch == 0xC000003E:
            code.append((JGE, "eperm", 0, 0x40000000))  # the x32 ABI
        code.append((JEQ, "flags", 0, unshare))
        code.append((JEQ, "flags", 0, clone))
        code.append((JEQ, "enosys", 0, clone3))
        code.append((JEQ, "eperm", 0, setns))
        code.append((RET, 0, 0, ALLOW))
    at("flags")
    code.append((LD_ABS, 0, 0, 16))  # seccomp_data.args[0], its low 32 bits (little-endian)
    code.append((JSET, "eperm", 0, CLONE_NEWUSER))
    code.append((RET, 0, 0, ALLOW))
    at("eperm")
    code.append((RET, 0, 0, EPERM))
    at("enosys")
    code.append((RET, 0, 0, ENOSYS))
    return inside.bpf_program(code, labels)



def userns_filter_fd() -> int:
    """A file descriptor to read ``userns_filter()`` from (bwrap's ``--seccomp FD``)."""
    r, w = os.pipe()
    os.write(w, userns_filter())  # 300 bytes: within a pipe's buffer
    os.close(w)
    return r


# --------------------------------------------------------------------------------------
# The sandbox (the grader's side)
# --------------------------------------------------------------------------------------

_uids = itertools.cycle(range(61000, 61500))  # one user per sandbox when the grader is root
_uid_lock = threading.Lock()


def bwrap() -> str:
    """The path of ``bwrap``, or ``SandboxError`` naming what to install."""
    path = shutil.which("bwrap")
    if path is None:
        raise SandboxError(INSTALL_HINT)
    return path


def visible_paths(root: Path) -> list[str]:
    """What the sandbox sees, read-only: the system, the interpreter and its packages, and
    the parts of the repository that the notebooks read (the package, the data and the
    cached course task)."""
    paths = [p for p in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
             if os.path.exists(p)]
    packages = [x for x in sys.path if x and os.path.isdir(x) and Path(x).name in ("site-packages", "dist-packages")]
    for p in sorted({sys.prefix, sys.base_prefix, os.path.realpath(sys.base_prefix),
                     *(os.path.realpath(x) for x in packages)}):
        p = os.path.realpath(p)
        inside_root = Path(p).is_relative_to(root)
        if not inside_root and not any(Path(p).is_relative_to(q) for q in paths):
            paths.append(p)
    paths += [str(root / part) for part in ("course_utils", "data", ".venv")
              if (root / part).exists() and str(root / part) not in paths]
    # the generated course task (load_synthetic's cache: seconds to build again in every sandbox)
    paths += sorted(str(p) for p in (root / ".cache").glob("synthetic-*.json.gz"))
    return paths


def _site_packages() -> list[Path]:
    return [Path(os.path.realpath(x)) for x in sys.path
            if x and os.path.isdir(x) and Path(x).name in ("site-packages", "dist-packages")]


def command(argv: list[str], inputs: Path, root: Path, limits: Limits, hide: list[Path] = (),
            env: dict | None = None, replace: dict | None = None, absent: list[str] = (),
            status_fd: int | None = None, seccomp_fd: int | None = None) -> tuple[list[str], int]:
    """The bwrap command line that runs ``argv`` in the sandbox and the uid it runs as.

    The sandbox: a private tmpfs of ``limits.tmp_bytes`` at ``/tmp`` (the work folder is in it:
    a submission that fills it fills only its own), ``inputs`` read-only at ``IN_SANDBOX_INPUT``,
    the runner (``INSIDE_FILE``) at ``IN_SANDBOX_CODE``, the environment ``env`` and nothing else; ``hide``: folders
    that stay out of view even where they sit inside a visible one; ``replace``: path in the
    sandbox -> a folder or file of the grader's bound there instead (the course package without
    the assignment's reference answers); ``absent``: packages (by name) whose installed folder is
    an empty one in the sandbox (the library that implements an assignment). bwrap runs without
    privileges in a user namespace of its own in which no further user namespace can be made
    (``--disable-userns``); as root, ``setpriv`` first drops to a user of the sandbox's own with no
    capabilities (the process limit of one submission never touches another). ``status_fd``:
    bwrap's own report (``--json-status-fd``: the child started, its exit code), which nothing in
    the sandbox can write."""
    shown = visible_paths(root)
    as_root = os.geteuid() == 0
    with _uid_lock:
        uid = next(_uids) if as_root else os.getuid()
    gid = uid if as_root else os.getgid()
    cmd = ["prlimit", f"--as={limits.memory_bytes}", f"--nproc={limits.processes}",
           f"--fsize={limits.file_bytes}", f"--cpu={int(limits.cpu_seconds)}", "--core=0", "--"]
    cmd += [bwrap()]
    if as_root:  # bwrap mounts as root; setpriv (below) then drops to the sandbox's own user
        cmd += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    else:
        cmd += ["--unshare-all", "--unshare-user", "--disable-userns", "--uid", str(uid), "--gid", str(gid)]
    cmd += ["--die-with-parent", "--new-session", "--proc", "/proc", "--dev", "/dev",
            "--perms", "1777", "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp"]
    if status_fd is not None:
        cmd += ["--json-status-fd", str(status_fd)]
    if seccomp_fd is not None:  # no user namespace inside (userns_filter)
        cmd += ["--seccomp", str(seccomp_fd)]
    parents = sorted({str(a) for p in [*shown, f"{IN_SANDBOX_CODE}/x"] for a in Path(p).parents
                      if str(a) != "/" and not any(Path(a).is_relative_to(q) for q in shown)},
                     key=lambda a: a.count("/"))
    for a in parents:  # folders on the way to what is bound: traversable, otherwise empty
        cmd += ["--perms", "0755", "--dir", a]
    for p in shown:
        cmd += ["--ro-bind", p, p]
    for h in [root, *hide]:
        h = Path(h).resolve()
        if any(h.is_relative_to(p) for p in shown):
            cmd += ["--tmpfs", str(h)]
            for p in shown:  # the parts of a hidden folder that stay visible, bound again
                if Path(p).is_relative_to(h) and p != str(h):
                    cmd += ["--ro-bind", p, p]
    for inside, outside in (replace or {}).items():
        cmd += ["--ro-bind", str(outside), str(inside)]
    for package in absent:
        for site in _site_packages():
            if (site / package).is_dir():
                cmd += ["--tmpfs", str(site / package), "--remount-ro", str(site / package)]
    cmd += ["--ro-bind", str(inputs), IN_SANDBOX_INPUT,
            "--ro-bind", str(INSIDE_FILE), f"{IN_SANDBOX_CODE}/{IN_KERNEL_MODULE}.py",
            "--chdir", "/tmp", "--clearenv"]  # the runner makes IN_SANDBOX_WORK, its own
    base = {"HOME": "/tmp/home", "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
            "JUPYTER_RUNTIME_DIR": "/tmp/home/runtime", "IPYTHONDIR": "/tmp/home/ipython",
            "MPLCONFIGDIR": f"{IN_SANDBOX_WORK}/.cache", "MPLBACKEND": "Agg", "LANG": "C.UTF-8", "PYTHONNOUSERSITE": "1"}
    for k, v in {**base, **(env or {})}.items():
        cmd += ["--setenv", k, str(v)]
    cmd += ["--"]
    if as_root:
        cmd += ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--inh-caps=-all",
                "--bounding-set=-all", "--no-new-privs"]
    return cmd + list(argv), uid


class Cgroup:
    """A control group of one sandbox (cgroup v2, or v1's cpu, cpuacct, memory and pids), when
    the grader may make one (as root): at most one CPU's worth of time per second (a submission
    that forks busy loops slows only itself), the sandbox's memory in all, its processes, and the
    CPU time it used (the time limit counts that, not the wall clock). ``None`` paths: no
    cgroup here; the per-process limits (``prlimit``) still hold."""
    V2 = Path("/sys/fs/cgroup")
    V1 = Path("/sys/fs/cgroup")

    def __init__(self, name: str, limits: Limits):
        self.paths: list[Path] = []
        self.usage: tuple[Path, str] | None = None
        if os.geteuid() != 0:
            return
        try:
            if (self.V2 / "cgroup.controllers").is_file():
                here = Path("/sys/fs/cgroup") / Path(open("/proc/self/cgroup").read().split("::", 1)[-1].strip()).relative_to("/")
                parent = here.parent if (here / "cgroup.procs").exists() else here
                group = parent / name
                group.mkdir()
                self.paths = [group]
                for f, v in (("cpu.max", "100000 100000"), ("memory.max", limits.sandbox_memory_bytes),
                             ("pids.max", limits.processes)):
                    _write_if(group / f, v)
                self.usage = (group / "cpu.stat", "v2")
            elif (self.V1 / "cpuacct").is_dir():
                for controller in ("cpu", "cpuacct", "memory", "pids"):
                    if (self.V1 / controller).is_dir():
                        group = self.V1 / controller / name
                        group.mkdir()
                        self.paths.append(group)
                        if controller == "cpu":
                            _write_if(group / "cpu.cfs_period_us", 100000)
                            _write_if(group / "cpu.cfs_quota_us", 100000)
                        elif controller == "memory":
                            _write_if(group / "memory.limit_in_bytes", limits.sandbox_memory_bytes)
                        elif controller == "pids":
                            _write_if(group / "pids.max", limits.processes)
                        elif controller == "cpuacct":
                            self.usage = (group / "cpuacct.usage", "v1")
        except OSError:
            self.close()
            self.paths, self.usage = [], None

    def enter_command(self) -> list[str]:
        """A shell prefix that puts itself (and so everything it starts) into the group."""
        if not self.paths:
            return []
        writes = " && ".join(f"echo $$ > {p / 'cgroup.procs'}" for p in self.paths)
        return ["/bin/sh", "-c", f"{writes} && exec \"$@\"", "sh"]

    def cpu_seconds(self) -> float | None:
        if self.usage is None:
            return None
        try:
            path, kind = self.usage
            text = path.read_text()
            if kind == "v1":
                return int(text) / 1e9
            return int(text.split("usage_usec", 1)[1].split()[0]) / 1e6
        except (OSError, ValueError, IndexError):
            return None

    def waited_ns(self) -> dict[int, int] | None:
        """Nanoseconds each live thread of the group has waited for a CPU so far (its run-queue
        delay: ``/proc/<tid>/schedstat``'s second field), by thread id; None where this kernel
        keeps no such count."""
        out: dict[int, int] = {}
        for path in self.paths[:1]:  # every controller's group holds the same processes
            try:
                pids = (path / "cgroup.procs").read_text().split()
            except OSError:
                return None
            for pid in pids:
                try:
                    for task in Path(f"/proc/{pid}/task").iterdir():
                        out[int(task.name)] = int((task / "schedstat").read_text().split()[1])
                except FileNotFoundError:
                    if not Path("/proc/self/schedstat").exists():
                        return None
                except (OSError, ValueError, IndexError):
                    pass
        return out

    def kill(self) -> None:
        for path in self.paths:
            try:
                for pid in (path / "cgroup.procs").read_text().split():
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except (ProcessLookupError, ValueError):
                        pass
            except OSError:
                pass

    def close(self) -> None:
        for path in self.paths:
            for _ in range(50):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    self.kill()
                    time.sleep(0.1)


def _write_if(path: Path, value) -> None:
    if path.exists():
        path.write_text(str(value))


MAX_RESULT_BYTES = 256 * 2**20  # what the runner may send back in all


def run_notebook(nb, work: Path, root: Path, time_limit: float | None, timeout: int,
                 sandbox: bool = True, limits: Limits | None = None, env: dict | None = None,
                 hide: list[Path] = (), cpu: int | None = None, replace: dict | None = None,
                 absent: list[str] = ()) -> tuple["object", bool, str, dict]:
    """Execute ``nb`` with the files of ``work`` (a fresh folder holding what the notebook reads:
    it is copied into the sandbox's own tmpfs, never written by the sandbox), in the sandbox
    unless ``sandbox`` is False; return (executed notebook or None, timed out, what went wrong,
    question -> the text its probe sent back). ``time_limit``: seconds of CPU time of the whole
    sandbox where a cgroup measures it (a busy machine slows a submission without failing it),
    with wall time limited to ``limits.wall_factor`` times that; the sandbox is killed, with
    every process in it, at either. ``SandboxError`` only when bwrap itself reported that it
    could not start the sandbox (its status channel, which the sandbox cannot write)."""
    import nbformat
    limits = limits or Limits()
    if time_limit:
        limits = dataclasses.replace(limits, cpu_seconds=min(limits.cpu_seconds, time_limit + limits.grace_seconds))
    work = Path(work)
    nbformat.write(nb, work / "run.ipynb")
    _seed_caches(work / ".cache")
    result_r, result_w = os.pipe()
    status_r, status_w = os.pipe() if sandbox else (None, None)
    seccomp = userns_filter_fd() if sandbox else None
    group = Cgroup(f"grader-{os.getpid()}-{next(_group_ids)}", limits) if sandbox else None
    try:
        if sandbox:
            argv = [sys.executable, "-I", f"{IN_SANDBOX_CODE}/{IN_KERNEL_MODULE}.py", "run", IN_SANDBOX_INPUT,
                    IN_SANDBOX_WORK, str(time_limit or 0), str(timeout), str(limits.output_bytes), "1", str(result_w)]
            cmd, uid = command(argv, work, root, limits, hide, env, replace, absent, status_fd=status_w,
                               seccomp_fd=seccomp)
            if os.geteuid() == 0:  # readable by the sandbox's user, for bwrap to bind
                for p in [work.parent, work, *work.rglob("*")]:
                    os.chown(p, uid, uid)
            cmd = group.enter_command() + cmd
            full_env = None
        else:
            cmd = [sys.executable, "-u", str(INSIDE_FILE), "run", str(work), str(work),
                   str(time_limit or 0), str(timeout), str(limits.output_bytes), "0", str(result_w)]
            full_env = {**os.environ, **(env or {})}
        if cpu is not None and shutil.which("taskset"):
            cmd = ["taskset", "--cpu-list", str(cpu), *cmd]
        log = work.parent / f"{work.name}.log"
        with open(log, "wb") as out:
            child = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True, env=full_env, cwd=str(work),
                                     pass_fds=[fd for fd in (result_w, status_w, seccomp) if fd is not None])
        for fd in (result_w, status_w, seccomp):
            if fd is not None:
                os.close(fd)
        result_w = status_w = seccomp = None
        received = _Reader(result_r, MAX_RESULT_BYTES)
        status = _Reader(status_r, 2**16) if status_r is not None else None
        killed = _wait(child, time_limit, limits, group)
        received.join()
        if status is not None:
            status.join()
    finally:
        for fd in (result_w, status_w, seccomp):
            if fd is not None:
                os.close(fd)
        if group is not None:
            group.kill()
            group.close()
    if status is not None:
        reports = _json_lines(bytes(status.data))
        if not any("child-pid" in r for r in reports):  # bwrap never started the sandbox
            raise SandboxError("bwrap could not start the sandbox: "
                               + (_tail(log).strip().splitlines() or [f"exit status {child.returncode}"])[-1][:300])
    if killed:
        return None, True, killed, {}
    if received.overflow:
        return None, False, "the run sent back more than the output limit", {}
    try:
        data = json.loads(bytes(received.data).decode("utf-8", "replace")) if received.data else None
        if not isinstance(data, dict):
            last = [line for line in _tail(log).strip().splitlines() if line.strip()][-1:] or [""]
            return None, False, f"the run ended without a result (exit status {child.returncode}: {last[0][:200]})", {}
        probes = data.get("probes")
        probes = {str(k): v for k, v in probes.items() if isinstance(v, str)} if isinstance(probes, dict) else {}
        return (nbformat.reads(data["executed"], as_version=4), bool(data.get("timed_out")), "", probes)
    except Exception as err:  # noqa: BLE001  (what comes back is the student's to break)
        return None, False, f"the executed notebook could not be read back ({type(err).__name__})", {}


_group_ids = itertools.count()


class _Reader(threading.Thread):
    """Reads a pipe to its end in the background, keeping at most ``cap`` bytes."""

    def __init__(self, fd: int, cap: int):
        super().__init__(daemon=True)
        self.fd, self.cap, self.data, self.overflow = fd, cap, bytearray(), False
        self.start()

    def run(self):
        try:
            while True:
                chunk = os.read(self.fd, 1 << 20)
                if not chunk:
                    break
                if len(self.data) + len(chunk) > self.cap:
                    self.overflow = True
                    continue  # read on (the writer must not block), keep nothing more
                self.data += chunk
        finally:
            os.close(self.fd)


def _json_lines(data: bytes) -> list[dict]:
    out = []
    for part in data.decode("utf-8", "replace").replace("}{", "}\n{").splitlines():
        try:
            value = json.loads(part)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def _wait(child, time_limit: float | None, limits: Limits, group: "Cgroup | None") -> str:
    """Wait for ``child``; kill it (and the sandbox) past the CPU-time limit (where a cgroup
    counts it) or the wall-time limit; return why it was killed ('' if it was not)."""
    cpu_limit = (time_limit or 3600) + limits.grace_seconds
    counted = group is not None and group.cpu_seconds() is not None
    wall_limit = cpu_limit * (limits.wall_factor if counted else 1)
    # the wall clock runs on for a submission only while its threads wait for a CPU that others
    # hold (a busy machine): a submission that sleeps is stopped at the limit itself, not at
    # wall_factor times it (grader-3: one `time.sleep` held a worker for 22 minutes)
    waited: dict[int, int] | None = {} if counted and group.waited_ns() is not None else None
    start = time.monotonic()
    while True:
        try:
            child.wait(timeout=0.25)
            return ""
        except subprocess.TimeoutExpired:
            pass
        if waited is not None:
            now = group.waited_ns() or {}
            waited.update({tid: max(ns, waited.get(tid, 0)) for tid, ns in now.items()})
            wall_limit = min(cpu_limit * limits.wall_factor, cpu_limit + sum(waited.values()) / 1e9)
        used = group.cpu_seconds() if counted else None
        if used is not None and used > cpu_limit:
            why = f"stopped after {used:.0f} s of CPU time (the sandbox and every process in it were killed)"
        elif time.monotonic() - start > wall_limit:
            why = (f"stopped after {time.monotonic() - start:.0f} s, {used or 0:.0f} s of CPU time "
                   "(the sandbox and every process in it were killed)")
        else:
            continue
        _kill(child)
        if group is not None:
            group.kill()
        return why


def run_empty(argv: list[str], root: Path, timeout: float = 60) -> tuple[bool, "subprocess.CompletedProcess"]:
    """Run ``argv`` in a sandbox with nothing of a submission in it (as a submission's run is
    sandboxed: the same view, limits, user and seccomp filter); (whether bwrap started it, the
    finished process with its output)."""
    import tempfile
    with tempfile.TemporaryDirectory(prefix="grader-empty-") as tmp:
        inputs = Path(tmp) / "in"
        inputs.mkdir()
        status_r, status_w = os.pipe()
        seccomp = userns_filter_fd()
        try:
            cmd, uid = command(list(argv), inputs, root, Limits(), status_fd=status_w, seccomp_fd=seccomp)
            if os.geteuid() == 0:
                for p in (Path(tmp), inputs):
                    os.chown(p, uid, uid)
            done = subprocess.run(cmd, capture_output=True, pass_fds=[status_w, seccomp], timeout=timeout)
        finally:
            os.close(status_w)
            os.close(seccomp)
        with os.fdopen(status_r, "rb") as f:
            reports = _json_lines(f.read())
        return any("child-pid" in r for r in reports), done


def preflight(root: Path) -> None:
    """Start one empty sandbox: ``SandboxError`` (with bwrap's own words) when this machine
    cannot sandbox, before any submission is graded."""
    started, done = run_empty(["/bin/true"], root)
    if not started or done.returncode != 0:
        text = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise SandboxError(f"bwrap could not start a sandbox: {text[-1] if text else done.returncode}")


def _seed_caches(folder: Path) -> None:
    """Matplotlib's font list, copied from the grader's cache (building it anew costs seconds)."""
    folder.mkdir(exist_ok=True)
    cache = Path(os.environ.get("MPLCONFIGDIR") or Path.home() / ".cache" / "matplotlib")
    for f in cache.glob("fontlist-*.json") if cache.is_dir() else []:
        shutil.copy(f, folder / f.name)


def _kill(child) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    child.wait()


def _tail(path: Path, size: int = 4000) -> str:
    with open(path, "rb") as f:
        f.seek(max(0, path.stat().st_size - size))
        return f.read().decode("utf-8", "replace")
