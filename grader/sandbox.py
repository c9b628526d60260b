"""Where a submission runs: a bubblewrap sandbox, and the runner that executes it there.

The grader (``grader.run``) never runs a student's code in its own process. It
writes the notebook to run (read-only cells, the student's answer cells, and for every
question a *probe*: calls of the student's functions on the grader's inputs) into a fresh
work folder, and starts this file as a script inside ``bwrap``:

- an unprivileged user of its own (a uid per sandbox when the grader runs as root, so that
  the process limit of one submission never touches another), a read-only view of the
  system and of what the course needs (the interpreter, its packages, ``course_utils/``,
  ``data/``) and nothing else: not the repository (solutions, hidden tests, reference
  checkpoints), not the folder of submissions, not the grader's files; a private ``/tmp``
  whose only shared part is the work folder; its own PID namespace (the grader's processes
  cannot be seen, so cannot be signalled) and no network;
- limits (``prlimit``): address space per process, number of processes, size of any file
  written; the runner caps the output it keeps per notebook; the grader kills the sandbox
  at the time limit, and every process in it dies with it (PID namespace).

What comes back is plain data: the executed notebook (JSON, read with a size cap) and one
JSON file per probe (``encode``/``decode``: numbers, strings, lists, tuples, dicts and
tensors as lists of numbers; never pickle). The grader judges it in its own process
(``grader.verdicts``).

A probe's answer is taken out of the student's reach as soon as its cell has run: the runner
(not the kernel) removes ``out/<question>.json`` before the probe cell, reads and removes it
right after, and keeps it in its own memory (the runner makes itself non-dumpable, so the
kernel, the same user, can neither trace it nor open its files through ``/proc``). At the end
it kills every other process of the sandbox and only then writes the answers (``probes/``),
the executed notebook and ``executed.done``: a later cell, a thread or a detached process
cannot change an earlier probe's answer (found by the a6 red team: the last answer cell
recomputed every earlier probe's answers and overwrote their files).

Torch and the course package as the submission found them: the grader's cell before the first
answer cell takes a first look (``watch``: the attributes of every loaded module of torch and
``course_utils``, of every class defined there, the code and defaults of their functions, torch
modes and global hooks), and every probe compares before and after its calls (``changed``); a
probe that finds them changed sends back what changed instead of answers, and its question
scores 0. It catches, when they run, the writes into torch that a reading of the answer cells
(``grader.answer_checks``) cannot follow; turning this check off needs the grader's module or
the builtins, which that reading flags.

Leaves out: Docker (bubblewrap is the one sandbox here), cgroup limits on the total memory
of a sandbox (the address-space limit is per process).
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
IN_SANDBOX_WORK = "/tmp/work"      # the work folder, as the sandbox sees it
IN_SANDBOX_CODE = "/tmp/grader"    # the folder of this file, as the sandbox sees it
TIME_LIMIT_ERROR = "TimeLimit"
INTERRUPTED = "interrupted: the time limit was reached while this cell ran"  # its message, mid-cell
PROBE_KEY = "grader_probe"         # metadata key of a probe cell (its value: the question's grade_id)
PROBES = "probes"                  # the folder of the probes' answers, written by the runner at the end


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
    tmp_bytes: int = 256 * 2**20      # the private /tmp (a tmpfs)
    grace_seconds: float = 30.0       # after the time limit, before the whole sandbox is killed


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
#: grader's calls go through: a submission that changes them could change what a probe sees.
WATCHED = ("torch", "course_utils")
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
             # operators and meta kernels as it first runs: not these)
             "aten kernels registered through torch.library": sum(
                 1 for k in getattr(torch.library, "_impls", ()) if k.startswith("aten/") and not k.endswith("/Meta")),
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


def watch() -> None:
    """Take the first look (the grader's cell before the first answer cell runs it), with
    ``FIRST_LOOK_IMPORTS`` loaded first."""
    global _first_look
    import importlib
    for name in FIRST_LOOK_IMPORTS:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
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
    return [f"{what}: {_first_look['state'][what]} before, {value} now"
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
    results = []
    found = changed()  # torch or the course changed before the calls: what they return is not judged
    for call in calls if not found else ():
        try:
            results.append({"value": encode(run_call(namespace, call))})
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


def run_call(namespace: dict, call: dict):
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
            return run_call(namespace, {**arg["$make"], "object": True})
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
            obj = _unchanging(target, name)(*call["init"], **call.get("init_kwargs", {}))
            if call.get("state") is not None:
                obj.load_state_dict(call["state"])
            if hasattr(obj, "eval"):
                obj.eval()
            if "steps" in call:
                results, prev = [], None
                for step in call["steps"]:
                    fn = getattr(obj, step["method"]) if step.get("method") else obj
                    args = [prev if a == "$prev" else a for a in step.get("args", [])]
                    prev = _unchanging(fn, _called(name, step.get("method")))(*args, **step.get("kwargs", {}))
                    results.append(prev)
                return results
            if call.get("object"):
                return obj
            target = getattr(obj, call["method"]) if call.get("method") else obj
            name = _called(name, call.get("method"))
        args, kwargs = call.get("args", []), call.get("kwargs", {})
        checked = _unchanging(target, name, tuple(call.get("may_change", ())))
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


def _unchanging(fn, name: str, may_change=()):
    """``fn``, raising ``ArgumentChanged`` when a call changes one of its arguments in place
    (not an object it was given, such as a model: only data, and the containers holding it)."""
    def checked(*args, **kwargs):
        before = [_snapshot(a) for a in args], {k: _snapshot(v) for k, v in kwargs.items()}
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


def watch_source(code: str) -> str:
    """The code of the cell that takes the first look (before the first answer cell)."""
    return f"__import__('sys').path.insert(0, {code!r})\n__import__({IN_KERNEL_MODULE!r}).watch()"


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

def execute(nb, workdir: Path, timeout: int = 900, time_limit: float | None = None,
            output_bytes: int | None = None, env: dict | None = None, probes: dict | None = None) -> bool:
    """Run ``nb`` in place in ``workdir`` with the course kernel; errors are kept in the
    outputs (every cell runs). ``timeout``: seconds per cell; ``time_limit``: seconds for
    the whole notebook, after which the running cell is interrupted and the remaining cells
    are not run (their output says so); ``output_bytes``: the output kept in all (what is
    printed beyond it is dropped, with a note); ``probes``: filled with question -> the text
    its probe cell wrote, read and removed as soon as that cell has run. Returns whether the
    time limit was reached."""
    import nbformat
    from nbclient import NotebookClient

    deadline = time.monotonic() + time_limit if time_limit else None
    stopped, kept = [], [0]

    class Client(NotebookClient):
        async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
            if deadline is not None and cell.cell_type == "code" and time.monotonic() >= deadline:
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
            if deadline is not None and time.monotonic() >= deadline and cell.get("cell_type") == "code":
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
    client.execute(env={**os.environ, **(env or {})})
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


def _write_replacing(path: Path, text: str) -> None:
    """Write ``path`` anew (whatever stood there, a link or a folder, goes first)."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    path.write_text(text)


def runner_main(argv: list[str]) -> int:
    """``sandbox.py run NOTEBOOK OUT.json TIME_LIMIT TIMEOUT OUTPUT_BYTES [SANDBOXED]``:
    execute the notebook in its folder; write the probes' answers (``probes/<question>.json``),
    the executed notebook and whether time ran out. ``SANDBOXED`` = 1: this runs in the
    sandbox, where the runner is untraceable and, before it writes anything, kills every other
    process (never outside it: that would be every process of the user)."""
    import nbformat
    notebook, out, time_limit, timeout, output_bytes, *rest = argv
    sandboxed = rest[:1] == ["1"]
    if sandboxed:
        _untraceable()
    Path(out).with_suffix(".started").write_text("")
    nb = nbformat.read(notebook, as_version=4)
    probes: dict[str, str] = {}
    timed_out = execute(nb, Path(notebook).parent, int(timeout), float(time_limit) or None, int(output_bytes),
                        probes=probes)
    if sandboxed:
        _kill_the_rest()
    folder = Path(notebook).parent / PROBES
    if folder.is_symlink() or folder.is_file():
        folder.unlink()
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(exist_ok=True)
    for question, text in probes.items():
        _write_replacing(folder / f"{question}.json", text)
    _write_replacing(Path(out), nbformat.writes(nb))
    _write_replacing(Path(out).with_suffix(".done"), json.dumps({"timed_out": timed_out}))
    return 0


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


def command(argv: list[str], work: Path, root: Path, limits: Limits, hide: list[Path] = (),
            env: dict | None = None) -> tuple[list[str], int]:
    """The bwrap command line that runs ``argv`` in the sandbox (``work`` bound at
    ``/tmp/work``, this file at ``/tmp/grader``, environment ``env`` and nothing else) and
    the uid it runs as; ``hide``: folders that must stay out of view even where they sit
    inside a visible one. As root, bwrap sets up the mounts and ``setpriv`` then drops to a
    user of the sandbox's own with no capabilities; otherwise a user namespace does it."""
    shown = visible_paths(root)
    as_root = os.geteuid() == 0
    with _uid_lock:
        uid = next(_uids) if as_root else os.getuid()
    gid = uid if as_root else os.getgid()
    cmd = ["prlimit", f"--as={limits.memory_bytes}", f"--nproc={limits.processes}",
           f"--fsize={limits.file_bytes}", "--core=0", "--", bwrap()]
    if as_root:
        cmd += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    else:
        cmd += ["--unshare-all", "--uid", str(uid), "--gid", str(gid)]
    cmd += ["--die-with-parent", "--new-session", "--proc", "/proc", "--dev", "/dev",
            "--perms", "1777", "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp"]
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
    cmd += ["--bind", str(work), IN_SANDBOX_WORK,
            "--ro-bind", str(Path(__file__).resolve()), f"{IN_SANDBOX_CODE}/{IN_KERNEL_MODULE}.py",
            "--chdir", IN_SANDBOX_WORK, "--clearenv"]
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


def run_notebook(nb, work: Path, root: Path, time_limit: float | None, timeout: int,
                 sandbox: bool = True, limits: Limits | None = None, env: dict | None = None,
                 hide: list[Path] = (), cpu: int | None = None) -> tuple["object", bool, str]:
    """Execute ``nb`` in ``work`` (a fresh folder holding what the notebook reads), in the
    sandbox unless ``sandbox`` is False, on CPU ``cpu`` only if given (so that a submission
    that keeps every core busy slows no other); return (executed notebook or None, timed out,
    what went wrong). The sandbox is killed, with every process in it, ``grace_seconds``
    after the time limit."""
    import nbformat
    limits = limits or Limits()
    work = Path(work)
    (work / "out").mkdir(exist_ok=True)
    nbformat.write(nb, work / "run.ipynb")
    _seed_caches(work / ".cache")
    inside = IN_SANDBOX_WORK if sandbox else str(work)
    argv = [sys.executable, "-I" if sandbox else "-u",
            f"{IN_SANDBOX_CODE}/{IN_KERNEL_MODULE}.py" if sandbox else str(Path(__file__).resolve()),
            "run", f"{inside}/run.ipynb", f"{inside}/executed.ipynb", str(time_limit or 0), str(timeout),
            str(limits.output_bytes), "1" if sandbox else "0"]
    if sandbox:
        cmd, uid = command(argv, work, root, limits, hide, env)
        if os.geteuid() == 0:
            for p in [work, *work.rglob("*")]:
                os.chown(p, uid, uid)
        full_env = None
    else:
        cmd, full_env = argv, {**os.environ, **(env or {})}
    if cpu is not None and shutil.which("taskset"):
        cmd = ["taskset", "--cpu-list", str(cpu), *cmd]
    log = work.parent / f"{work.name}.log"
    hard = (time_limit or 3600) + limits.grace_seconds
    with open(log, "wb") as out:
        child = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 start_new_session=True, env=full_env, cwd=str(work))
        killed = False
        try:
            child.wait(timeout=hard)
        except subprocess.TimeoutExpired:
            killed = True
            _kill(child)
    tail = _tail(log)
    done = work / "executed.done"
    if killed:
        return None, True, f"stopped after {hard:g} s (the sandbox and every process in it were killed)"
    if child.returncode != 0 or not done.exists():
        if not (work / "executed.started").exists() and "bwrap:" in tail:  # it never started
            raise SandboxError(f"bwrap could not start the sandbox: {tail.strip().splitlines()[-1]}")
        last = [line for line in tail.strip().splitlines() if line.strip()][-1:] or [f"exit status {child.returncode}"]
        return None, False, f"the run ended without a result ({last[0][:200]})"
    try:
        timed_out = bool(json.loads(done.read_text()[:1000]).get("timed_out"))
        path = work / "executed.ipynb"
        if path.stat().st_size > limits.output_bytes * 4 + 8 * 2**20:
            return None, timed_out, "the executed notebook came back larger than the output limit"
        return nbformat.read(path, as_version=4), timed_out, ""
    except Exception as err:  # noqa: BLE001  (what comes back is the student's to break)
        return None, False, f"the executed notebook could not be read back ({type(err).__name__})"


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
