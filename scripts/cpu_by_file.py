"""A pytest plugin: where a test run's time goes, in CPU seconds per test file.

``--durations`` gives wall seconds, which on a machine that two workers keep busy say more
about what ran beside a test than about the test: a notebook cell whose kernel shared a core
with a browser looks three times as slow as it is. This plugin counts, for each file, the CPU
time of the pytest process and of the processes it started and waited for (nbval's kernels,
the browser test's JupyterLab and Chromium, the grader's sandboxes, subprocesses), and prints
the files that cost most, the total, and what the whole machine did over the run (busy CPU
seconds against the cores times the wall time, from ``/proc/stat`` where there is one): the
wall time is never less than the CPU work divided by the cores, and when the machine was busy
throughout it is about that, so only less work shortens it.

Loaded by tests/conftest.py, so by every run of the tests folder (``make test``, ``make integration``, ``make unit``;
not ``make nbval``, which runs notebooks/ alone); works with and without pytest-xdist (each
worker counts its own files and hands them to the controller). A child process counts when it
is waited for, for the file whose test was running then (a module's fixtures are torn down in
its last test). Not counted: processes never waited for (a double-forked daemon, Chromium's
helpers), collection and each worker's start-up, the xdist controller; the machine's total
includes them. Does nothing where there is no ``resource`` module (Windows).
"""

from __future__ import annotations

import json
import os
import time

import pytest

try:
    import resource
except ImportError:   # Windows: nothing is counted, nothing printed
    resource = None

#: files printed in the summary (the rest are summed in one line)
TOP = 15

_by_file: dict[str, list[float]] = {}   # file -> [cpu seconds, wall seconds, tests]
_machine_start: tuple[float, float] | None = None


def cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and of the children it has waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def machine_busy_seconds(stat: str = "/proc/stat") -> float | None:
    """CPU seconds the machine's cores spent working since boot (Linux: user, nice, system, irq
    and softirq; not idle, iowait, or steal, the time the host gave other guests), or None."""
    try:
        with open(stat) as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    if len(fields) < 7:
        return None
    user, nice, system, _idle, _iowait, irq, softirq = fields[:7]
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def _add(name: str, cpu: float, wall: float, tests: int) -> None:
    entry = _by_file.setdefault(name, [0.0, 0.0, 0])
    entry[0] += cpu
    entry[1] += wall
    entry[2] += tests


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    # setup, call and teardown (a module's fixtures are torn down in its last test's teardown; a
    # session fixture is set up in the first test that asks for it, torn down in the last test)
    if resource is None:
        yield
        return
    cpu, wall = cpu_seconds(), time.perf_counter()
    yield
    _add(item.nodeid.split("::")[0], cpu_seconds() - cpu, time.perf_counter() - wall, 1)


def pytest_sessionstart(session):
    global _machine_start
    _by_file.clear()   # a second session in the same process starts from nothing
    busy = machine_busy_seconds()
    _machine_start = None if busy is None else (busy, time.perf_counter())


def pytest_sessionfinish(session):
    workeroutput = getattr(session.config, "workeroutput", None)   # an xdist worker: hand it on
    if workeroutput is not None:
        workeroutput["cpu_by_file"] = json.dumps(_by_file)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """(the xdist controller) a worker's counts, added to the controller's, once: xdist calls
    this twice for a worker that was interrupted, with the same output."""
    for name, counts in json.loads(getattr(node, "workeroutput", {}).pop("cpu_by_file", "{}")).items():
        _add(name, *counts)


def summary_lines(by_file: dict[str, list[float]], top: int = TOP,
                  machine: tuple[float, float, int] | None = None) -> list[str]:
    """The summary's lines: the ``top`` files by CPU seconds, the rest in one line, the
    total, and (``machine``: busy CPU seconds, wall seconds, cores) the whole machine."""
    ranked = sorted(by_file.items(), key=lambda kv: -kv[1][0])
    lines = [f"{'CPU s':>7} {'wall s':>7} {'tests':>5}  file (wall s: summed over the workers; a notebook's tests are its cells)"]
    for name, (cpu, wall, tests) in ranked[:top]:
        lines.append(f"{cpu:7.0f} {wall:7.0f} {tests:5d}  {name}")
    rest = ranked[top:]
    if rest:
        lines.append(f"{sum(v[0] for _, v in rest):7.0f} {sum(v[1] for _, v in rest):7.0f} "
                     f"{sum(int(v[2]) for _, v in rest):5d}  the other {len(rest)} file{'s' * (len(rest) > 1)}")
    notebooks = sum(v[0] for name, v in ranked if name.endswith(".ipynb"))
    total = sum(v[0] for _, v in ranked)
    lines.append(f"{total:7.0f} {sum(v[1] for _, v in ranked):7.0f} {sum(int(v[2]) for _, v in ranked):5d}  "
                 f"in all ({notebooks:.0f} CPU s of it in notebooks)")
    if machine is not None:
        busy, wall, cores = machine
        wall = round(wall)
        lines.append(f"the machine (anything else it ran included): {busy:.0f} CPU s busy of {cores} cores x "
                     f"{wall} s = {cores * wall} CPU s ({busy / max(cores * wall, 1):.0%} busy)")
    return lines


@pytest.hookimpl(trylast=True)   # after --durations
def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _by_file or getattr(config, "workeroutput", None) is not None:
        return
    machine = None
    busy = machine_busy_seconds()
    if busy is not None and _machine_start is not None:
        machine = (busy - _machine_start[0], time.perf_counter() - _machine_start[1], os.cpu_count() or 1)
    terminalreporter.write_sep("=", "where the time went: CPU seconds per file (tests and the processes they waited for)")
    for line in summary_lines(_by_file, machine=machine):
        terminalreporter.write_line(line)
