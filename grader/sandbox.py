"""Where a submission runs: a bubblewrap sandbox, and the runner that executes it there.

The grader (``grader.run``) never runs a student's code in its own process. It
writes the notebook to run (read-only cells, the student's answer cells, and for every
question a *probe*: calls of the student's functions on the grader's inputs) into a fresh
work folder, and starts this file as a script inside ``bwrap``:

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
notebook and the probes' answers (JSON, read with a size cap; one answer per probe (``encode``/``decode``: numbers, strings, lists, tuples, dicts and
tensors as lists of numbers; never pickle)). Whether the sandbox started is bwrap's own word
(``--json-status-fd``), never a file the sandbox writes. The grader judges it in its own process
(``grader.verdicts``).

A probe's answer is taken out of the student's reach as soon as its cell has run: the runner
(not the kernel) removes ``out/<question>.json`` before the probe cell, reads and removes it
right after, and keeps it in its own memory (the runner makes itself non-dumpable, so the
kernel, the same user, can neither trace it nor open its files through ``/proc``). At the end
it kills every other process of the sandbox and only then sends the answers and the executed
notebook down its pipe: a later cell, a thread or a detached process
cannot change an earlier probe's answer (found by the a6 red team: the last answer cell
recomputed every earlier probe's answers and overwrote their files).

Torch and the course package as the submission found them: the grader's cell before the first
answer cell takes a first look (``watch``: the attributes of every loaded module of torch and
``course_utils``, of every class defined there, the code and defaults of their functions, torch
modes and global hooks), and every probe compares before and after its calls (``changed``); a
probe that finds them changed sends back what changed instead of answers, and its question
scores 0. It catches, when they run, the writes into torch that a reading of the answer cells
cannot follow. It guards the probe's own checks (arguments changed in place, gradients);
the verdicts themselves are computed outside the sandbox, from plain data.

Leaves out: Docker (bubblewrap is the one sandbox here); without root, cgroup limits (the
per-process limits hold, and the time limit counts the sandbox's CPU time read from ``/proc``).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

INSTALL_HINT = ("bubblewrap (the `bwrap` command) is not installed: it is what keeps a submission from "
                "reaching the grader, the other submissions and the solutions. Install it "
                "(Debian/Ubuntu: `apt-get install bubblewrap`; Fedora: `dnf install bubblewrap`), or, for "
                "submissions you trust only, grade with --no-sandbox (every row is then flagged)")
NO_SANDBOX_FLAG = "not sandboxed (--no-sandbox)"
IN_SANDBOX_WORK = "/tmp/work"      # the work folder, as the sandbox sees it (in its private tmpfs)
IN_SANDBOX_INPUT = "/tmp/input"    # what the grader prepared, read-only, copied into the work folder
IN_SANDBOX_CODE = "/tmp/grader"    # the folder of this file, as the sandbox sees it
TIME_LIMIT_ERROR = "TimeLimit"
INTERRUPTED = "interrupted: the time limit was reached while this cell ran"  # its message, mid-cell
FORBIDDEN_FILE = "forbidden.json"  # in the inputs: the torch functions and operators refused in calls
CHECKPOINT_KEY = "$checkpoint"     # a call's "state" given as {CHECKPOINT_KEY: file}: loaded in the sandbox
PROBE_KEY = "grader_probe"         # metadata key of a probe cell (its value: the question's grade_id)


#: the name the kernels import this module by (``watch_source``, ``probe_source``): in the sandbox
#: this file is bound at ``IN_SANDBOX_CODE/grader_sandbox.py``, outside it ``code_folder`` copies it
IN_KERNEL_MODULE = "grader_sandbox"


def code_folder(work: Path) -> str:
    """A folder in ``work`` that holds this module as ``IN_KERNEL_MODULE`` (a copy), for a run
    without the sandbox: the kernels find it there as they find it at ``IN_SANDBOX_CODE`` in one."""
    folder = Path(work) / "code"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(Path(__file__).resolve(), folder / f"{IN_KERNEL_MODULE}.py")
    return str(folder)


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
# Plain data both ways (JSON; tensors as lists of numbers)
# --------------------------------------------------------------------------------------

def encode(obj, depth: int = 0):
    """``obj`` as JSON-able data: tuples, dicts with non-string keys and tensors tagged."""
    if depth > 50:
        raise ValueError("nested more than 50 levels deep")
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return float(obj) if math.isfinite(obj) else {"__float__": repr(float(obj))}
    if isinstance(obj, tuple):
        return {"__tuple__": [encode(x, depth + 1) for x in obj]}
    if isinstance(obj, (list, range)):
        return [encode(x, depth + 1) for x in obj]
    if isinstance(obj, dict):
        return {"__dict__": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in obj.items()]}
    if isinstance(obj, (set, frozenset)):
        return {"__set__": sorted((encode(x, depth + 1) for x in obj), key=repr)}
    if type(obj).__module__.split(".")[0] == "torch" or hasattr(obj, "detach"):
        import torch
        if isinstance(obj, torch.Tensor):
            t = torch.Tensor.detach(obj).cpu()
            t = torch.Tensor.as_subclass(t, torch.Tensor)  # a subclass sends its plain numbers
            flat = [x if isinstance(x, (bool, int)) or math.isfinite(x) else repr(x)
                    for x in torch.Tensor.tolist(t.reshape(-1))]
            return {"__tensor__": {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
                                   "data": flat}}
        if isinstance(obj, torch.dtype):
            return {"__dtype__": str(obj).removeprefix("torch.")}
    raise TypeError(f"cannot send a {type(obj).__name__} back to the grader (plain data only: "
                    "numbers, strings, lists, tuples, dicts, tensors)")


def decode(data, depth: int = 0):
    """The inverse of ``encode`` (tensors come back as plain ``torch.Tensor``)."""
    if depth > 60:
        raise ValueError("nested more than 60 levels deep")
    if isinstance(data, list):
        return [decode(x, depth + 1) for x in data]
    if not isinstance(data, dict):
        return data
    if len(data) != 1:
        raise ValueError("a tagged value must have exactly one key")
    (tag, value), = data.items()
    if tag == "__tuple__":
        return tuple(decode(x, depth + 1) for x in value)
    if tag == "__dict__":
        return {_hashable(decode(k, depth + 1)): decode(v, depth + 1) for k, v in value}
    if tag == "__set__":
        return {_hashable(decode(x, depth + 1)) for x in value}
    if tag == "__float__":
        return float(value)
    if tag == "__dtype__":
        import torch
        dtype = getattr(torch, str(value), None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"not a dtype: {value!r}")
        return dtype
    if tag == "__tensor__":
        import torch
        dtype = getattr(torch, str(value["dtype"]), None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"not a dtype: {value['dtype']!r}")
        flat = [float(x) if isinstance(x, str) else x for x in value["data"]]
        return torch.tensor(flat, dtype=dtype).reshape([int(n) for n in value["shape"]])
    raise ValueError(f"unknown tag {tag!r}")


def _hashable(x):
    if isinstance(x, list):
        return tuple(_hashable(v) for v in x)
    return x


# --------------------------------------------------------------------------------------
# Torch and the course as the submission found them
# --------------------------------------------------------------------------------------

#: The packages a probe relies on (its copies, comparisons, gradients, ``encode``) and the
#: grader's calls go through: a submission that changes them could change what a probe sees; and
#: this module as the kernel imported it (the watch cell, before the first answer: an answer that
#: replaced its ``_refusing`` once ran the refused torch operations in the probe, grader-3).
WATCHED = ("torch", "course_utils", IN_KERNEL_MODULE)
#: Loaded before the first look: torch and what ``run_call`` builds arguments with (a module
#: loaded later is not compared: nothing a probe uses).
FIRST_LOOK_IMPORTS = ("torch", "course_utils.data")
WATCH_KEY = "grader_watch"  # metadata key of the grader's cell that takes the first look
TAMPERED = "$changed"       # the key of a probe's answer when torch or the course was changed
_first_look: dict | None = None
#: Attributes that Python itself writes into classes as it runs: pickle's cache of a class's
#: slot names (``copyreg``, on the first ``torch.save`` or ``pickle`` of an instance).
SETTLED_NAMES = {"__slotnames__"}


def _is_code(v) -> bool:
    """Whether putting another object in ``v``'s place changes behaviour: a function, a class,
    a module, a descriptor (not a number or a cache that a package rebinds as it runs)."""
    import types
    return callable(v) or issubclass(type(v), (type, types.ModuleType, property, classmethod, staticmethod))


def _look(modules: tuple[str, ...] | None = None, reads: dict | None = None) -> tuple[dict, dict]:
    """What stands where now: ((id of owner, attribute) -> object, id of owner -> (its name,
    'module', 'class' or 'function', the owner)), for every loaded module of ``WATCHED``, every class
    defined there (its own dictionary) and every Python function found in either (its code
    and defaults: ``f.__code__ = ...`` changes a function without a store into a module).
    Read with ``vars``, ``type`` and dictionary views only, which a submission cannot replace.
    ``modules``: only these (``QUICK``). ``reads``: filled with everything read, as it was read
    (``_as_when``)."""
    import types
    seen, owners, functions = {}, {}, []
    record = reads is not None
    started, mappings, class_modules, read_functions = [], [], [], []
    for name, module in list(sys.modules.items()) if modules is None else [(m, sys.modules.get(m)) for m in modules]:
        if type(name) is not str:
            started = None  # a name that is not a plain string runs code when split: never cached
        if name.split(".")[0] not in WATCHED or not issubclass(type(module), types.ModuleType):
            continue
        if record and started is not None:
            started.append((name, module))
        owners[id(module)] = (name, "module", module)  # the object kept: its id is not reused
        mapping = vars(module)
        keys, values = list(mapping), list(mapping.values())  # one read (no code runs in between)
        if record:
            mappings.append((mapping, keys, values))
        for key, value in zip(keys, values):
            seen[(id(module), key)] = value
            functions.append(value)
            if issubclass(type(value), type):
                where = vars(value).get("__module__", _ABSENT)
                if record:
                    class_modules.append((vars(value), where))
                    if where is not _ABSENT and type(where) not in _PLAIN_MODULE_NAMES:
                        started = None  # its str() may run code, and differ from one look to the next
                if str("" if where is _ABSENT else where).split(".")[0] in WATCHED:
                    owners[id(value)] = (f"{vars(value).get('__module__')}.{value.__qualname__}", "class", value)
                    cmapping = vars(value)
                    ckeys, cvalues = list(cmapping), list(cmapping.values())
                    if record:
                        mappings.append((cmapping, ckeys, cvalues))
                    for ckey, cvalue in zip(ckeys, cvalues):
                        seen[(id(value), ckey)] = cvalue
                        functions.append(cvalue)
    for f in functions:
        if type(f) in (classmethod, staticmethod):
            f = f.__func__
        elif type(f) is property:
            functions.extend(part for part in (f.fget, f.fset, f.fdel) if part is not None)
            continue
        if type(f) is types.FunctionType and id(f) not in owners:
            owners[id(f)] = (f"{f.__module__}.{f.__qualname__}", "function", f)
            code, defaults, kwdefaults = f.__code__, f.__defaults__, f.__kwdefaults__
            seen[(id(f), "__code__")], seen[(id(f), "__defaults__")], seen[(id(f), "__kwdefaults__")] = \
                code, defaults, kwdefaults
            if record:
                read_functions.append((f, code, defaults, kwdefaults))
    if record:
        reads.update(started=started, mappings=mappings, class_modules=class_modules, functions=read_functions)
    return seen, owners


def _state() -> dict:
    """What changes every call without a store into a dictionary: torch function and dispatch
    modes, saved-tensor hooks, module-wide hooks (read after ``_look``'s comparison has shown
    the readers used here to be torch's own)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return {}
    device = sys.modules.get("torch.utils._device")
    modes = torch.overrides._get_current_function_mode_stack()
    state = {"torch function modes": sum(1 for m in modes if not (  # set_default_device("cpu") is one
                 device is not None and type(m) is device.DeviceContext and m.device == torch.device("cpu"))),
             "torch dispatch modes": torch._C._len_torch_dispatch_stack(),
             # a kernel of torch's own operators put in from Python (torch.compile adds its own
             # operators and meta kernels as it first runs: not these), or taken out (the
             # refusals of ``refuse_everywhere``): which ones, not how many (one destroyed and
             # another registered leave the count as it was)
             "aten kernels registered through torch.library": tuple(sorted(
                 k for k in getattr(torch.library, "_impls", ()) if k.startswith("aten/") and not k.endswith("/Meta"))),
             "saved-tensor hooks": torch._C._autograd._top_saved_tensors_default_hooks(False) is not None}
    hooks = sys.modules.get("torch.nn.modules.module")
    for key, value in (list(vars(hooks).items()) if hooks is not None else ()):
        if key.startswith("_global_") and isinstance(value, dict):
            state[f"module-wide {key.removeprefix('_global_')}"] = len(value)
    return state


def _settle() -> None:
    """Let torch make, before the first look, the changes it makes to itself on first use
    (each found by running honest code after a first look, tests/test_grader_redteam.py):
    TorchDynamo wraps ``torch.manual_seed`` and more when it is first imported (an optimizer's
    first ``__init__`` imports it), ``torch.compile`` wraps ``torch.jit.trace`` and its first
    call ``nn.Module.__init__``; an optimizer class gets its profiled ``step`` at its first
    instance, and its first step loads the profiler's monitor; ``torch.func.vmap`` registers its
    batching kernels of torch's operators on first use. Each step may fail on another
    torch (a private name gone): what it would have settled is then reported."""
    import io
    torch = sys.modules["torch"]
    steps = [lambda: __import__("torch._dynamo"), lambda: torch.compile(lambda x: x),
             lambda: torch.func.vmap(torch.sin)(torch.ones(2)),  # registers vmap's kernels of torch's operators
             lambda: __import__("torch._dynamo.mutation_guard", fromlist=["_"]).install_generation_tagging_init()]
    weight = torch.nn.Parameter(torch.zeros(2, 2))
    for cls in vars(torch.optim).values():
        if issubclass(type(cls), type) and issubclass(cls, torch.optim.Optimizer) and cls is not torch.optim.Optimizer:
            steps.append(lambda cls=cls: cls([weight], lr=0.1).step(lambda: weight.sum()))
    steps.append(lambda: torch.save({"tensor": weight.detach(), "parameter": weight, "module": torch.nn.Linear(1, 1)},
                                    io.BytesIO()))
    weight.grad = torch.zeros(2, 2)
    for step in steps:
        try:
            step()
        except Exception:  # noqa: BLE001  (another torch: nothing to settle there)
            pass


def watch(work: str | None = None) -> None:
    """Take the first look (the grader's cell before the first answer cell runs it), with
    ``FIRST_LOOK_IMPORTS`` loaded first; with ``work`` (the work folder), refuse the operators its
    ``in/FORBIDDEN_FILE`` lists from now on, everywhere in this process (``refuse_everywhere``)."""
    global _first_look
    import importlib
    for name in FIRST_LOOK_IMPORTS:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    listed = Path(work, "in", FORBIDDEN_FILE) if work is not None else None
    if listed is not None and listed.is_file():
        refused = json.loads(listed.read_text())
        refuse_everywhere(refused)
        if refused.get("operators") or refused.get("functions"):
            refuse_exec()  # a program started from here would be a Python without the refusals
    if "torch" in sys.modules and not _first_look:
        _settle()  # once: what it settles stays settled
    seen, owners = _look()
    by_owner: dict = {}
    for owner, key in seen:
        by_owner.setdefault(owner, []).append(key)
    _first_look = {"objects": seen, "owners": owners, "by_owner": by_owner, "state": _state(),
                   "accepted": {}}  # per ``changed(modules)``: what it read when it last found nothing


def _private(name: str) -> bool:
    """A module or class inside a private part of torch (``torch._dynamo``, ``torch._decomp``):
    what ``torch.compile`` adds there as it runs (compiled functions, RNG state) or removes is
    not compared (a replaced function or class still is)."""
    return any(part.startswith("_") and not part.startswith("__") for part in name.split(".")[1:])


#: The modules whose objects a probe's own checks use after a student's call returns (the
#: in-place comparison, the gradients, the no-grad modes, modules' hooks, ``Batch``): compared
#: again right after every call, so that a change that undoes itself when it is first used
#: (found by the red team: ``del torch.Tensor.all`` inside a patched ``all``) is seen.
QUICK = ("torch", "torch._tensor", "torch.autograd", "torch.autograd.grad_mode", "torch.utils._contextlib",
         "torch.nn.modules.module", "torch.nn.parameter", "course_utils.data")


class TorchChanged(Exception):
    """Torch or the course package changed during a student's call (``QUICK``)."""


def _quick_check() -> None:
    """Raise ``TorchChanged`` if what ``QUICK`` names is not as the first look found it."""
    found = changed(QUICK)
    if found:
        raise TorchChanged(found)


def changed(modules: tuple[str, ...] | None = None) -> list[str]:
    """What has been changed in ``WATCHED`` since ``watch()``, in words (empty: nothing, or no
    first look was taken): code (a function, a class, a descriptor, a module) replaced in or
    removed from a module or a class, any attribute removed from or added to a class (it hides
    the inherited one), code added to a module, a function's code or defaults swapped, a torch
    mode or a module-wide hook left in place. What a package rebinds as it runs (a number such
    as ``RemovableHandle.next_id``, a string, a cache, a module's ``None`` filled in on first
    use, a submodule loaded) and modules loaded after the first look are not compared; what
    ``torch.compile`` adds to or removes from torch's private modules neither. ``modules``:
    compare those only (and the torch modes and hooks)."""
    if _first_look is None:
        return []
    accepted = _first_look["accepted"].get(modules)
    if accepted is not None and _as_when(accepted, modules):
        return _state_changes()  # every object as it was when this comparison last found nothing
    before, owners = _first_look["objects"], _first_look["owners"]
    reads = {}
    now, looked = _look(modules, reads)
    found, let_pass = [], []  # let_pass: the differences judged harmless, judged again by _as_when
    pairs = before.items() if modules is None else (  # only what this look looked at
        ((owner, key), before[(owner, key)]) for owner in looked if owner in owners
        for key in _first_look["by_owner"].get(owner, ()))
    for (owner, key), value in pairs:
        if key in SETTLED_NAMES:
            continue
        name, kind, _ = owners[owner]
        if (owner, key) not in now:
            judged = (_removal_counts, (name, kind, value))
        elif now[(owner, key)] is not value:
            judged = (_replacement_counts, (kind, value, now[(owner, key)]))
        else:
            continue
        if judged[0](*judged[1]):
            found.append(f"{name}.{key} was {'removed' if judged[0] is _removal_counts else 'replaced'}")
        else:
            let_pass.append(judged)
    for (owner, key), value in now.items():
        if (owner, key) in before or owner not in owners or key in SETTLED_NAMES:
            continue
        name, kind, _ = owners[owner]
        if _addition_counts(name, kind, value):
            found.append(f"{name}.{key} was added")
        else:
            let_pass.append((_addition_counts, (name, kind, value)))
    if not found:
        found = _state_changes()
        if reads["started"] is not None:
            _first_look["accepted"][modules] = {**reads, "let_pass": let_pass}
    return found


def _removal_counts(name: str, kind: str, value) -> bool:
    return (kind == "class" or _is_code(value)) and not _private(name)


def _replacement_counts(kind: str, value, now) -> bool:
    return kind == "function" or _is_code(value) or (
        _is_code(now) and (kind == "class" or value is not None))  # None: a lazy cache filled


def _addition_counts(name: str, kind: str, value) -> bool:
    return (kind == "class" or (_is_code(value) and not issubclass(type(value), type(sys)))) and not _private(name)


def _state_changes() -> list[str]:
    """The torch modes and global hooks (``_state``) that differ from the first look's, in words."""
    def said(what, before, now):
        if isinstance(before, tuple) and isinstance(now, tuple):  # which ones: those taken out or put in
            gone, new = sorted(set(before) - set(now)), sorted(set(now) - set(before))
            return f"{what}: " + "; ".join(part for part in (gone and f"taken out {', '.join(gone)}",
                                                             new and f"put in {', '.join(new)}") if part)
        return f"{what}: {before} before, {now} now"
    return [said(what, _first_look["state"][what], value)
            for what, value in _state().items() if _first_look["state"].get(what, value) != value]


#: bound when the grader's module is loaded, before any submission runs (a submission that
#: replaces the builtins or ``operator`` does not reach these)
_is, _all, _len, _map, _zip, _type, _issubclass, _ModuleType = \
    __import__("operator").is_, all, len, map, zip, type, issubclass, type(sys)
_ABSENT = object()
#: what a class's ``__module__`` may be for a look to be cached: a string, or the slot of a
#: built-in type (``types.FunctionType.__module__``), whose ``str`` is fixed
_PLAIN_MODULE_NAMES = (str, __import__("types").MemberDescriptorType, __import__("types").GetSetDescriptorType)


def _as_when(reads: dict, modules: tuple[str, ...] | None) -> bool:
    """Whether ``changed(modules)`` would find nothing again, without looking again: every object
    that its last look read (``_look``'s ``reads``, taken while it read them, when it found
    nothing) is still the one that stood there (the same modules; in each module and class
    the same names, in the same order, holding the same objects; every class's ``__module__``
    and every function's code and defaults), and every difference from the first look that it
    let pass (a number rebound, a cache filled) would be let pass again (a type can become
    callable). Identity only: nothing here calls an object a submission could have made. A
    fast pass, about a hundredth of the look and its comparison, run after every call of a
    probe (``QUICK``)."""
    started = reads["started"]
    if modules is None:
        now = []
        for name, module in list(sys.modules.items()):
            if _type(name) is not str:
                return False
            if name.split(".")[0] in WATCHED and _issubclass(_type(module), _ModuleType):
                now.append((name, module))
    else:
        now = [(m, sys.modules.get(m)) for m in modules]
        now = [(m, module) for m, module in now if _issubclass(_type(module), _ModuleType)]
    if _len(now) != _len(started) or not _all(a is c and b is d for (a, b), (c, d) in _zip(now, started)):
        return False
    for mapping, keys, values in reads["mappings"]:
        if _len(mapping) != _len(keys) or not _all(_map(_is, mapping, keys)) \
                or not _all(_map(_is, mapping.values(), values)):
            return False
    if not _all(mapping.get("__module__", _ABSENT) is where for mapping, where in reads["class_modules"]):
        return False
    if not _all(f.__code__ is code and f.__defaults__ is defaults and f.__kwdefaults__ is kwdefaults
                for f, code, defaults, kwdefaults in reads["functions"]):
        return False
    return not any(judge(*args) for judge, args in reads["let_pass"])


# --------------------------------------------------------------------------------------
# Probes: run in the sandbox, in the kernel, where a test cell stood
# --------------------------------------------------------------------------------------

def probe(namespace: dict, question: str, work: str = IN_SANDBOX_WORK) -> None:
    """Make the calls the grader asked for in ``work/in/<question>.json`` with the names of
    ``namespace`` (the student's notebook) and write each result, or the error it raised,
    to ``work/out/<question>.json``; if torch or the course package is not as ``watch()``
    found it, before the calls or after them, write ``{TAMPERED: what changed}`` instead."""
    calls = decode(json.loads(Path(work, "in", f"{question}.json").read_text()))
    refused = Path(work, "in", FORBIDDEN_FILE)
    refused = json.loads(refused.read_text()) if refused.is_file() else None
    loaded = {}
    for call in calls:
        given = call.get("state")
        if isinstance(given, dict) and set(given) == {CHECKPOINT_KEY}:
            name = Path(str(given[CHECKPOINT_KEY])).name
            if name not in loaded:  # the handed-in weights, checked by the grader before the run
                import torch
                loaded[name] = torch.load(Path(IN_SANDBOX_INPUT if Path(IN_SANDBOX_INPUT, name).is_file() else work, name),
                                          map_location="cpu", weights_only=True)["model"]
            call["state"] = loaded[name]
    results = []
    found = changed()  # torch or the course changed before the calls: what they return is not judged
    for call in calls if not found else ():
        try:
            results.append({"value": encode(run_call(namespace, call, refused))})
        except TorchChanged as err:  # ... or during one
            found = err.args[0]
            break
        except Exception as err:  # noqa: BLE001  (the student's error is the result)
            text = str(err).strip().splitlines()
            results.append({"error": f"{type(err).__name__}: {text[0][:200] if text else ''}"})
    found = found or changed()  # ... or during them (and put back before they returned)
    if found:
        results = {TAMPERED: found[:5] + ([f"and {len(found) - 5} more"] if len(found) > 5 else [])}
    out = Path(work, "out")
    out.mkdir(exist_ok=True)
    (out / f"{question}.json").write_text(json.dumps(results))


class ArgumentChanged(Exception):
    """A call changed what it was given (a tensor, a list, a dict, a record's field): the
    caller's data is lost, whatever the call returned."""


#: What a call with ``"grad": True`` returns when its result carries no gradient (the key of
#: a one-item dict; its value says what came back instead).
NO_GRADIENT = "$no_gradient"


class ForbiddenOperation(Exception):
    """A torch function or operator that the assignment lists as a reference answer ran."""


def _refusing(forbidden: dict | None):
    """A context in which the torch functions (by name: every path to the same function ends in
    the same ``__torch_function__`` call) and the aten operators (by name: a module's fast path
    reaches them without a Python call) of ``forbidden`` raise ``ForbiddenOperation``; after it,
    a mode stack that is not as it left it (a mode popped or pushed in a call) raises
    ``TorchChanged``. No-op without torch or without anything forbidden."""
    import contextlib
    torch = sys.modules.get("torch")
    if torch is None or not forbidden or not (forbidden.get("functions") or forbidden.get("operators")):
        return contextlib.nullcontext()
    from torch.overrides import TorchFunctionMode, _get_current_function_mode_stack
    from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode_stack
    functions, operators = frozenset(forbidden.get("functions", ())), frozenset(forbidden.get("operators", ()))
    course = _course_code()
    # frames between a caller and the mode: torch's Python dispatch of a function to the modes, and
    # a module's call (a course layer calls its attention as a module)
    passing = {id(torch.overrides.handle_torch_function.__code__), id(torch.nn.Module._call_impl.__code__),
               *([id(torch.nn.Module._wrapped_call_impl.__code__)] if hasattr(torch.nn.Module, "_wrapped_call_impl") else [])}
    handed = [0]  # > 0 while a listed function called by the course's own code runs (its operators too)

    def by_the_course() -> bool:
        """Whether the listed function was called by the course package's own code (a layer the
        assignment hands out uses torch's fused attention: ``course_utils.attention.fused_attention``),
        told by the identity of the calling frame's code (recorded by ``watch`` before any answer ran)."""
        frame = sys._getframe(2)
        while frame is not None and id(frame.f_code) in passing:
            frame = frame.f_back
        return frame is not None and id(frame.f_code) in course

    class Functions(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if getattr(func, "__name__", None) in functions:
                if not by_the_course():
                    raise ForbiddenOperation(f"torch's {func.__name__} is a reference answer of this assignment "
                                             "(write it yourself)")
                handed[0] += 1
                try:
                    return func(*args, **(kwargs or {}))
                finally:
                    handed[0] -= 1
            return func(*args, **(kwargs or {}))

    class Operators(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func._schema.name.split("::")[-1] in operators and not handed[0]:
                raise ForbiddenOperation(f"torch's operator {func._schema.name} does this assignment's work "
                                         "(write it yourself)")
            return func(*args, **(kwargs or {}))

    @contextlib.contextmanager
    def refusing():
        f, d = Functions(), Operators()
        depth_f, depth_d = len(_get_current_function_mode_stack()), len(_get_current_dispatch_mode_stack())
        with f, d:
            yield
            if _get_current_function_mode_stack()[depth_f:] != [f] or _get_current_dispatch_mode_stack()[depth_d:] != [d]:
                raise TorchChanged(["torch's mode stack was changed during a call"])
    return refusing()


#: the registrations of ``refuse_everywhere`` (kept alive: dropping one restores the kernel)
_everywhere: list = []
#: the dispatch keys at which an operator's own kernels are replaced by a refusal
_REFUSED_AT = ("CPU", "CUDA", "Meta", "CompositeExplicitAutograd", "CompositeImplicitAutograd")


def refuse_everywhere(forbidden: dict | None) -> None:
    """Replace the kernels of the listed aten operators (``forbidden["operators"]``, and the
    torch functions that are operators of their own, such as ``_scaled_dot_product_attention_math``)
    by one that raises, in torch's dispatcher: for every thread of the process and for every
    cell after the watch cell, not only while the grader's calls run (a thread started in a call,
    or an answer computed in an earlier cell from the grader's inputs, once reached torch's fused
    attention, grader-3). The course's own code does not need them in the sandbox
    (``grader.student_side`` writes its ``fused_attention`` out there)."""
    torch = sys.modules.get("torch")
    if torch is None or not forbidden:
        return
    import warnings
    names = set(forbidden.get("operators", ())) | {f for f in forbidden.get("functions", ()) if f.startswith("_")}
    library = torch.library.Library("aten", "IMPL")

    def refusal(name):
        def refuse(*args, **kwargs):
            raise RuntimeError(f"ForbiddenOperation: torch's operator aten::{name} does this assignment's work "
                               "(write it yourself)")
        return refuse
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overriding a previously registered kernel": the point
        for name in sorted(names):
            for key in _REFUSED_AT:
                try:
                    if torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", key):
                        library.impl(name, refusal(name), key)
                except (RuntimeError, AttributeError):  # an operator this torch does not have
                    pass
    _everywhere.append(library)


def _course_code() -> set[int]:
    """The ids of the code of every function and method of the course package that the first
    look found (``watch``: before any answer cell ran; the objects are kept alive there)."""
    if _first_look is None:
        return set()
    return {id(obj.__code__) for name, kind, obj in _first_look["owners"].values()
            if kind == "function" and name.split(".")[0] == "course_utils"}


def run_call(namespace: dict, call: dict, forbidden: dict | None = None):
    """One call: ``fn(*args, **kwargs)``; with ``init`` the object ``fn(*init)`` is made
    first, given the weights ``state`` (a state dict) and put in eval mode, and then
    ``method`` (default: the object itself) is called; ``steps``: several methods in turn
    on the same object (each a dict like this one, ``"$prev"`` in args is the last result).
    An argument (positional or keyword) ``{"$make": call}`` is the object that call returns (with no ``method``: the
    object itself); ``{"$fields": {...}}`` an object with those attributes; ``{"$batch": {...}}``
    a ``course_utils.data.Batch`` of those fields (``len``, ``num_tokens``, ``to`` as a student uses them).

    Every call runs under ``torch.no_grad()`` unless it says ``"no_grad": False``. A call
    that changes a tensor it was given (or a list, dict or record's field holding one), in
    place, raises ``ArgumentChanged`` naming the argument: its result may be right, but the
    caller's data is gone (``"may_change": [3, "cache"]``: argument 3, or the one named so,
    may change, e.g. a cache that the spec lets a step update in place). With ``"grad": True`` (a loss) the call runs with gradients on,
    its floating-point tensor arguments made leaves that require grad, and returns
    ``{"value": result, "gradients": {name: gradient of result.sum()}}`` with respect to
    those tensors (``args[0]``, ``args[1].field``, ...) and to the parameters of every
    ``nn.Module`` argument (``args[0].encoder.weight``, ...), sorted by name; a result that
    carries no gradient (computed outside autograd) gives ``{NO_GRADIENT: what it is}``."""
    import contextlib
    import types

    def resolve(arg):  # an argument the call builds: an object, or a record of fields
        if isinstance(arg, dict) and len(arg) == 1 and "$make" in arg:
            return run_call(namespace, {**arg["$make"], "object": True}, forbidden)
        if isinstance(arg, dict) and len(arg) == 1 and "$fields" in arg:
            return types.SimpleNamespace(**arg["$fields"])
        if isinstance(arg, dict) and len(arg) == 1 and "$batch" in arg:  # the course's own Batch
            from course_utils.data import Batch
            return Batch(**arg["$batch"])
        return arg
    call = {**call, "args": [resolve(a) for a in call.get("args", [])],
            "kwargs": {k: resolve(v) for k, v in call.get("kwargs", {}).items()},
            "init": [resolve(a) for a in call["init"]] if "init" in call else None}
    if call["init"] is None:
        del call["init"]
    name = call["fn"]
    if name not in namespace:
        raise NameError(f"name {name!r} is not defined")
    target = namespace[name]
    grad = contextlib.nullcontext()
    if call.get("grad"):
        grad = sys.modules["torch"].enable_grad()
    elif call.get("no_grad", True) and "torch" in sys.modules:
        grad = sys.modules["torch"].no_grad()
    with grad:
        if "init" in call:
            seed = call.get("seed")
            if seed is not None:
                sys.modules["torch"].manual_seed(seed)
            obj = _unchanging(target, name, (), forbidden)(*call["init"], **call.get("init_kwargs", {}))
            if call.get("state") is not None:
                obj.load_state_dict(call["state"])
            if hasattr(obj, "eval"):
                obj.eval()
            if "steps" in call:
                results, prev = [], None
                for step in call["steps"]:
                    fn = getattr(obj, step["method"]) if step.get("method") else obj
                    args = [prev if a == "$prev" else a for a in step.get("args", [])]
                    prev = _unchanging(fn, _called(name, step.get("method")), (), forbidden)(
                        *args, **step.get("kwargs", {}))
                    results.append(prev)
                return results
            if call.get("object"):
                return obj
            target = getattr(obj, call["method"]) if call.get("method") else obj
            name = _called(name, call.get("method"))
        args, kwargs = call.get("args", []), call.get("kwargs", {})
        checked = _unchanging(target, name, tuple(call.get("may_change", ())), forbidden)
        if call.get("grad"):
            return _with_gradients(checked, args, kwargs)
        return checked(*args, **kwargs)


def _called(name: str, method: str | None) -> str:
    return f"{name}(...).{method}" if method else name


# --------------------------------------------------------------------------------------
# Arguments changed in place
# --------------------------------------------------------------------------------------

class _Opaque:
    """An object a snapshot does not look into (a module, a generator): kept by identity."""
    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj


def _snapshot(x, depth: int = 0):
    """What ``x`` holds now, to tell later whether a call changed it: tensors cloned, lists,
    tuples, dicts, sets and records (``$fields``) walked, numbers and strings kept; anything
    else (a module, a generator) by identity only."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return ("tensor", (torch.Tensor.detach(x).clone(), x, type(x)))   # its values, the object, its class
    if depth > 50:
        return _Opaque(x)
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_snapshot(v, depth + 1) for v in x])
    if isinstance(x, dict):
        return ("dict", {k: _snapshot(v, depth + 1) for k, v in x.items()})
    if isinstance(x, (set, frozenset)):
        return ("set", frozenset(x))
    if _is_record(x):
        return ("fields", {k: _snapshot(v, depth + 1) for k, v in vars(x).items()})
    if x is None or isinstance(x, (bool, int, float, complex, str, bytes)):
        return ("value", x)
    return _Opaque(x)


def _is_record(x) -> bool:
    """A record of fields: ``$fields``' SimpleNamespace, or a dataclass instance (``$batch``)."""
    return type(x).__name__ == "SimpleNamespace" or (dataclasses.is_dataclass(x) and not isinstance(x, type))


def _same_tensor(a, b) -> bool:
    """Same shape, dtype and values (NaN equal to NaN), read with a subclass's
    ``__torch_function__`` off (it could answer with other values than the tensor holds)."""
    torch = sys.modules["torch"]
    with torch._C.DisableTorchFunctionSubclass():
        a = torch.Tensor.as_subclass(torch.Tensor.detach(a), torch.Tensor)
        if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
            return False
        if torch.equal(a, b):
            return True
        if a.is_floating_point() or a.is_complex():
            return bool(((a == b) | (a.isnan() & b.isnan())).all())
        return False


def _change(x, snap):
    """Where ``x`` differs from its snapshot ``snap``: (the place in words, e.g. ``field
    'tgt'``, the same as code, e.g. ``.tgt``, what stood there before: ``tensor``, ``list``,
    ..., what stands there now), or None when it holds what it held."""
    if isinstance(snap, _Opaque):
        return None if x is snap.obj else ("", "", "object", x)
    kind, held = snap
    torch = sys.modules.get("torch")
    if kind == "tensor":
        same = torch is not None and type(x) is held[2] and _same_tensor(x, held[0])  # a new class: changed
        return None if same else ("", "", kind, x)
    if kind in ("list", "tuple", "dict", "fields"):
        if kind in ("list", "tuple"):
            if type(x).__name__ != kind or len(x) != len(held):
                return ("", "", kind, x)
            places = [(f"item {i}", f"[{i}]", v, s) for i, (v, s) in enumerate(zip(x, held))]
        elif kind == "dict":
            if not isinstance(x, dict) or set(x) != set(held):
                return ("", "", kind, x)
            places = [(f"key {k!r}", f"[{k!r}]", x[k], s) for k, s in held.items()]
        else:
            fields = vars(x) if _is_record(x) else {}
            if not set(held) <= set(fields):
                return (f"field {sorted(set(held) - set(fields))[0]!r}", "", "field", None)
            places = [(f"field {k!r}", f".{k}", fields[k], s) for k, s in held.items()]
        for words, code, v, s in places:
            if kind in ("list", "dict") and not isinstance(s, _Opaque) and s[0] == "tensor" and v is not s[1][1]:
                return ("", "", kind, x)   # another object put in its place: the container changed
            found = _change(v, s)
            if found:
                return (", ".join(p for p in (words, found[0]) if p), code + found[1], found[2], found[3])
        return None
    if kind == "set":
        return None if isinstance(x, (set, frozenset)) and frozenset(x) == held else ("", "", kind, x)
    same = type(x) is type(held) and (x == held or (isinstance(x, float) and math.isnan(x) and math.isnan(held)))
    return None if same else ("", "", "value", x)


def _parameter_names(fn) -> list[str]:
    """The names of ``fn``'s positional parameters ([] when they cannot be read)."""
    import inspect
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(fn, torch.nn.Module):
        fn = fn.forward  # what calling a module runs
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


_COPIES = {"tensor": "{}.clone()", "list": "list({})", "dict": "dict({})", "set": "set({})"}


def _unchanging(fn, name: str, may_change=(), forbidden: dict | None = None):
    """``fn``, raising ``ArgumentChanged`` when a call changes one of its arguments in place
    (not an object it was given, such as a model: only data, and the containers holding it)."""
    def checked(*args, **kwargs):
        before = [_snapshot(a) for a in args], {k: _snapshot(v) for k, v in kwargs.items()}
        with _refusing(forbidden):
            out = fn(*args, **kwargs)
        named = _parameter_names(fn)
        given = [(i + 1, named[i] if i < len(named) else None, a, s) for i, (a, s) in enumerate(zip(args, before[0]))]
        given += [(k, k, kwargs[k], s) for k, s in before[1].items()]
        _quick_check()  # before the comparisons use torch (the last student code has run)
        for where, label, value, snap in given:
            if where in may_change or label in may_change:   # the call says this one may change (a cache)
                continue
            found = None if isinstance(snap, _Opaque) else _change(value, snap)
            if found:
                words, code, kind, now = found
                what = ", ".join(p for p in (label if label != where else None, words) if p)
                now = f"a tensor of shape {tuple(now.shape)}" if kind == "tensor" and hasattr(now, "shape") else \
                    f"a {kind}" if kind in _COPIES else "a value"
                fix = _COPIES.get(kind, "copy.copy({})").format(f"{label or 'x'}{code}")
                raise ArgumentChanged(f"{name} changed argument {where} ({what + ', ' if what else ''}{now}) in "
                                      f"place: the caller's data is lost; work on a copy: {fix}")
        return out
    return checked


# --------------------------------------------------------------------------------------
# Gradients of a loss
# --------------------------------------------------------------------------------------

def _with_gradients(fn, args: list, kwargs: dict):
    """``fn(*args, **kwargs)`` and the gradients of its sum (``run_call``'s ``"grad"``)."""
    import types
    torch = sys.modules["torch"]
    wrt = {}

    def leaf(x, path, depth=0):  # floating-point tensors become leaves that require grad
        if isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex()):
            wrt[path] = torch.Tensor.detach(x).clone().requires_grad_(True)
            return wrt[path]
        if depth > 50:
            return x
        if isinstance(x, (list, tuple)):
            return type(x)(leaf(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(x))
        if isinstance(x, dict):
            return {k: leaf(v, f"{path}[{k!r}]", depth + 1) for k, v in x.items()}
        if _is_record(x):  # $fields' SimpleNamespace, or a dataclass such as the course's Batch
            fields = {k: leaf(v, f"{path}.{k}", depth + 1) for k, v in vars(x).items()}
            return dataclasses.replace(x, **fields) if dataclasses.is_dataclass(x) else types.SimpleNamespace(**fields)
        if isinstance(x, torch.nn.Module):
            for pname, p in x.named_parameters():
                if p.requires_grad:
                    wrt[f"{path}.{pname}"] = p
        return x

    args = [leaf(a, f"args[{i}]") for i, a in enumerate(args)]
    kwargs = {k: leaf(v, f"kwargs[{k!r}]") for k, v in kwargs.items()}
    value = fn(*args, **kwargs)
    names = sorted(wrt)
    if not isinstance(value, torch.Tensor):
        return {NO_GRADIENT: f"a {type(value).__name__}, not a tensor"}
    if not value.requires_grad or value.grad_fn is None:
        return {NO_GRADIENT: "a tensor that does not require grad" if not value.requires_grad
                else "a tensor made from numbers (no grad_fn)"}
    total = value.sum()
    _quick_check()  # the result's own attributes (a subclass's) ran the last student code
    grads = torch.autograd.grad(total, [wrt[n] for n in names], allow_unused=True) if names else []
    if all(g is None for g in grads):
        return {NO_GRADIENT: "a tensor that depends on none of the inputs"}
    return {"value": torch.Tensor.detach(value), "gradients": dict(zip(names, grads))}


def watch_source(code: str, work: str | None = None) -> str:
    """The code of the cell that takes the first look (before the first answer cell); ``work``:
    the work folder, whose inputs list the operators refused from then on."""
    return f"__import__('sys').path.insert(0, {code!r})\n__import__({IN_KERNEL_MODULE!r}).watch({work!r})"


def probe_source(question: str, work: str, code: str) -> str:
    """The code of the cell that probes ``question`` (``work``, ``code``: the work folder and
    this file's folder, as the kernel sees them)."""
    # no name is bound in the student's globals: a student's function that the probe calls
    # must not find the grader's module (to switch its checks off) or sys (the reference)
    return (f"__import__('sys').path.insert(0, {code!r})\n"
            f"__import__({IN_KERNEL_MODULE!r}).probe(globals(), {question!r}, {work!r})")


# --------------------------------------------------------------------------------------
# The runner: executes the notebook (inside the sandbox)
# --------------------------------------------------------------------------------------

def sandbox_cpu_seconds() -> float:
    """CPU time used so far by every process of this PID namespace (the sandbox), the ones that
    ended included (their time is their parent's ``cutime``/``cstime`` once reaped, bwrap's
    init reaping the orphans): what the time limit counts, so that a busy machine slows a
    submission without failing it. Read from ``/proc``, which the sandbox's processes cannot forge."""
    ticks, total = os.sysconf("SC_CLK_TCK"), 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
                total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
            except (OSError, IndexError, ValueError):
                pass
    return total / ticks


def _interrupt_the_rest() -> None:
    """SIGINT to every process of the sandbox but this one and its init (the kernel's cell stops)."""
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in (1, me):
            try:
                os.kill(int(entry), signal.SIGINT)
            except OSError:
                pass


def execute(nb, workdir: Path, timeout: int = 900, time_limit: float | None = None,
            output_bytes: int | None = None, env: dict | None = None, probes: dict | None = None,
            cpu_time: bool = False, wall_factor: float = 4.0) -> bool:
    """Run ``nb`` in place in ``workdir`` with the course kernel; errors are kept in the
    outputs (every cell runs). ``timeout``: seconds per cell; ``time_limit``: seconds for
    the whole notebook, after which the running cell is interrupted and the remaining cells
    are not run (their output says so); ``output_bytes``: the output kept in all (what is
    printed beyond it is dropped, with a note); ``probes``: filled with question -> the text
    its probe cell wrote, read and removed as soon as that cell has run. ``cpu_time``: the
    time limit counts the sandbox's CPU time (``sandbox_cpu_seconds``; a watchdog interrupts
    the running cell when it is spent), with the wall clock allowed ``wall_factor`` times
    more; otherwise it counts wall time. Returns whether the time limit was reached."""
    import nbformat
    from nbclient import NotebookClient

    start = time.monotonic()
    deadline = start + time_limit * (wall_factor if cpu_time else 1) if time_limit else None

    def over() -> bool:
        if deadline is None:
            return False
        return time.monotonic() >= deadline or (cpu_time and sandbox_cpu_seconds() >= time_limit)

    stopped, kept, finished = [], [0], threading.Event()
    if cpu_time and time_limit:
        def watchdog():
            while not finished.wait(0.5):
                if sandbox_cpu_seconds() >= time_limit:
                    _interrupt_the_rest()
                    finished.wait(5)  # a cell that ignores the interrupt meets the per-cell timeout
        threading.Thread(target=watchdog, daemon=True).start()

    class Client(NotebookClient):
        async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
            if deadline is not None and cell.cell_type == "code" and over():
                stopped.append(cell_index)
                cell.outputs = [nbformat.v4.new_output(
                    "error", ename=TIME_LIMIT_ERROR, traceback=[],
                    evalue=f"not run: the submission's time limit ({time_limit:g} s) was reached")]
                return cell
            question = cell.get("metadata", {}).get(PROBE_KEY)
            if not isinstance(question, str):
                cell = await super().async_execute_cell(cell, cell_index, execution_count, store_history)
            else:
                answer = Path(workdir, "out", f"{question}.json")
                _take(answer)  # whatever an earlier cell wrote there is not this probe's answer
                try:
                    cell = await super().async_execute_cell(cell, cell_index, execution_count, store_history)
                finally:
                    text = _take(answer)
                    if text is not None and probes is not None:
                        probes[question] = text
            # the time limit's interrupt leaves the kernel's KeyboardInterrupt as the cell's only
            # error output (nbclient's timeout error goes into the reply, not the outputs): past
            # the deadline it is the limit (else, in the last cell, it read as the student's
            # error, and the submission as not timed out)
            if deadline is not None and over() and cell.get("cell_type") == "code":
                for i, out in enumerate(cell.get("outputs", [])):
                    if out.get("output_type") == "error" and out.get("ename") == "KeyboardInterrupt":
                        stopped.append(cell_index)
                        cell.outputs[i] = nbformat.v4.new_output(
                            "error", ename=TIME_LIMIT_ERROR, traceback=[], evalue=INTERRUPTED)
            return cell

        def output(self, outs, msg, display_id, cell_index):
            if output_bytes is None or msg["msg_type"] == "error":
                return super().output(outs, msg, display_id, cell_index)
            content = msg.get("content", {})
            size = len(str(content.get("text", ""))) + sum(len(str(v)) for v in (content.get("data") or {}).values())
            kept[0] += size
            if kept[0] > output_bytes:
                if kept[0] - size <= output_bytes:  # the first output over the cap: say so, once
                    outs.append(nbformat.v4.new_output(
                        "stream", name="stdout",
                        text=f"\n[the grader kept the first {output_bytes // 2**20} MiB of output; the rest was dropped]\n"))
                return None
            return super().output(outs, msg, display_id, cell_index)

    def cell_timeout(cell):
        if deadline is None:
            return timeout
        return max(1, min(timeout, int(deadline - time.monotonic()) + 1))

    client = Client(nb, timeout=timeout, timeout_func=cell_timeout, kernel_name="python3",
                    allow_errors=True, interrupt_on_timeout=True, shutdown_kernel="immediate",
                    error_on_timeout={"ename": TIME_LIMIT_ERROR, "evalue": INTERRUPTED, "traceback": []},
                    resources={"metadata": {"path": str(workdir)}})
    try:
        client.execute(env={**os.environ, **(env or {})})
    finally:
        finished.set()
    interrupted = any(o.get("output_type") == "error" and o.get("ename") == TIME_LIMIT_ERROR
                      for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    return bool(stopped) or interrupted


MAX_PROBE_BYTES = 32 * 2**20  # what one probe may send back


def _take(path: Path) -> str | None:
    """The text of the file ``path`` (None if it is not a plain file of at most
    MAX_PROBE_BYTES), which is then removed, whatever it was."""
    text = None
    try:
        if path.is_file() and not path.is_symlink() and path.stat().st_size <= MAX_PROBE_BYTES:
            text = path.read_text(errors="replace")
    except OSError:
        pass
    try:
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
    except OSError:
        pass
    return text


def _untraceable() -> None:
    """Make this process non-dumpable: a process of the same user without capabilities (the
    kernel) can then neither ptrace it nor open its memory or file descriptors in /proc."""
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0


def _kill_the_rest() -> None:
    """Kill every process this one may signal but itself (in the sandbox's PID namespace:
    the kernel's leftovers, threads and detached children; bwrap's init is not ours)."""
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass
    time.sleep(0.2)


def runner_main(argv: list[str]) -> int:
    """``sandbox.py run INPUT WORK TIME_LIMIT TIMEOUT OUTPUT_BYTES SANDBOXED RESULT_FD``: copy
    the folder ``INPUT`` (read-only) into ``WORK`` (the sandbox's private, size-limited tmpfs),
    execute ``WORK/run.ipynb`` there and send the result (the executed notebook, the probes'
    answers, whether time ran out) as one JSON document down the pipe ``RESULT_FD``: the one
    channel out of the sandbox, open in this process only (not inherited by the kernel, and this
    process is untraceable). ``SANDBOXED`` = 1: this runs in the sandbox, where the runner is
    untraceable and, before it sends anything, kills every other process (never outside it:
    that would be every process of the user)."""
    import nbformat
    source, workdir, time_limit, timeout, output_bytes, sandboxed, fd = argv
    sandboxed = sandboxed == "1"
    result = os.fdopen(int(fd), "wb")
    os.set_inheritable(int(fd), False)  # the kernel and its children never hold it
    if sandboxed:
        _untraceable()
    workdir = Path(workdir)
    if Path(source).resolve() != workdir.resolve():
        shutil.copytree(source, workdir, dirs_exist_ok=True)
    notebook = workdir / "run.ipynb"
    nb = nbformat.read(notebook, as_version=4)
    probes: dict[str, str] = {}
    timed_out = execute(nb, workdir, int(timeout), float(time_limit) or None, int(output_bytes), probes=probes,
                        cpu_time=sandboxed)
    if sandboxed:
        _kill_the_rest()
    result.write(json.dumps({"timed_out": timed_out, "probes": probes,
                             "executed": nbformat.writes(nb)}).encode("utf-8"))
    result.close()
    return 0


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
    return _bpf(code, labels)


def _bpf(code: list, labels: dict[str, int]) -> bytes:
    """``code`` ((op, jt, jf, k), jumps given as labels) as a ``struct sock_filter`` array."""
    import struct
    out = b""
    for i, (op, jt, jf, k) in enumerate(code):
        jt = labels[jt] - i - 1 if isinstance(jt, str) else jt
        jf = labels[jf] - i - 1 if isinstance(jf, str) else jf
        assert 0 <= jt < 256 and 0 <= jf < 256
        out += struct.pack("=HBBI", op, jt, jf, k)
    return out


#: execve and execveat per architecture (as ``_SYSCALLS``), and the number of seccomp itself
_EXECS = {0xC000003E: (59, 322), 0x40000003: (11, 358), 0xC00000B7: (221, 281)}
_SECCOMP = {"x86_64": 317, "aarch64": 277}


def exec_filter() -> bytes:
    """A classic BPF seccomp program that refuses ``execve`` and ``execveat`` with EPERM (and
    x86_64's x32 system calls); everything else is allowed."""
    LD_ABS, JEQ, JGE, RET = 0x20, 0x15, 0x35, 0x06
    ALLOW, EPERM = 0x7FFF0000, 0x00050000 | 1
    code: list = [(LD_ABS, 0, 0, 4)]  # seccomp_data.arch
    labels: dict[str, int] = {}
    for arch in _EXECS:
        code.append((JEQ, f"arch{arch}", 0, arch))
    code.append((RET, 0, 0, ALLOW))
    for arch, (execve, execveat) in _EXECS.items():
        labels[f"arch{arch}"] = len(code)
        code.append((LD_ABS, 0, 0, 0))  # seccomp_data.nr
        if arch == 0xC000003E:
            code.append((JGE, "eperm", 0, 0x40000000))  # the x32 ABI
        code += [(JEQ, "eperm", 0, execve), (JEQ, "eperm", 0, execveat), (RET, 0, 0, ALLOW)]
    labels["eperm"] = len(code)
    code.append((RET, 0, 0, EPERM))
    return _bpf(code, labels)


def refuse_exec() -> bool:
    """From now on no thread of this process, nor any process it starts, can execute a program
    (``exec_filter``, for every thread at once; it cannot be taken back): a new interpreter would
    hold none of ``refuse_everywhere``'s refusals (a forked child keeps them). Whether it took."""
    import ctypes
    number = _SECCOMP.get(os.uname().machine)
    if number is None:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    program = ctypes.create_string_buffer(exec_filter())

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
    fprog = Program(len(program.raw) // 8, ctypes.addressof(program))
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS: what lets a user install a filter
        return False
    return libc.syscall(number, 1, 1, ctypes.byref(fprog)) == 0  # SECCOMP_SET_MODE_FILTER, FLAG_TSYNC


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
    this file at ``IN_SANDBOX_CODE``, the environment ``env`` and nothing else; ``hide``: folders
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
            "--ro-bind", str(Path(__file__).resolve()), f"{IN_SANDBOX_CODE}/{IN_KERNEL_MODULE}.py",
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
            cmd = [sys.executable, "-u", str(Path(__file__).resolve()), "run", str(work), str(work),
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


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "run":
        sys.exit(runner_main(sys.argv[2:]))
    print(__doc__)
