"""What runs inside the sandbox: the runner that executes the notebook, and the grader's module
in the student's kernel (the first look at torch, the probes, the refused operations).

The grader (``grader.run``) writes the notebook to run (read-only cells, the student's answer
cells, and for every question a *probe*: calls of the student's functions on the grader's
inputs) into a fresh work folder, and the launcher (``grader.sandbox``) binds this file into the
sandbox as ``IN_KERNEL_MODULE.py`` (in its ``IN_SANDBOX_CODE``) and starts it there as a script
(``runner_main``); the kernel imports the same file by that name (the watch and probe cells,
``watch_source``, ``probe_source``). It is bound alone: it imports nothing of the grader or the
course, only the standard library, and torch, nbformat and nbclient where they are needed.

What comes back is plain data: the executed notebook and the probes' answers (one answer per
probe, ``encode``/``decode``: numbers, strings, lists, tuples, dicts and tensors as lists of
numbers; never pickle), sent by the runner down the pipe it alone holds. The grader judges them
in its own process (``grader.verdicts``).

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
the verdicts themselves are computed outside the sandbox, from plain data. Where the
assignment refuses torch operations, the watch cell refuses them in torch's dispatcher
(``refuse_everywhere``) and no program can be started from the kernel after it (``refuse_exec``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

IN_SANDBOX_WORK = "/tmp/work"      # the work folder, as the sandbox sees it (in its private tmpfs)
IN_SANDBOX_INPUT = "/tmp/input"    # what the grader prepared, read-only, copied into the work folder
TIME_LIMIT_ERROR = "TimeLimit"
INTERRUPTED = "interrupted: the time limit was reached while this cell ran"  # its message, mid-cell
FORBIDDEN_FILE = "forbidden.json"  # in the inputs: the torch functions and operators refused in calls
CHECKPOINT_KEY = "$checkpoint"     # a call's "state" given as {CHECKPOINT_KEY: file}: loaded in the sandbox
PROBE_KEY = "grader_probe"         # metadata key of a probe cell (its value: the question's grade_id)


#: the name the kernels import this module by (``watch_source``, ``probe_source``): in the sandbox
#: this file is bound at ``grader.sandbox.IN_SANDBOX_CODE``/grader_sandbox.py, outside it ``code_folder``
#: copies it (tracebacks through it name it so: the feedback hides that name, ``grader.report``)
IN_KERNEL_MODULE = "grader_sandbox"
#: this module as a traceback or a change names it: its file (with its folder and ``.py``), or one
#: of its names (``grader_sandbox._refusing``, group 1)
_IN_KERNEL_NAME = re.compile(rf"(?:/[\w./-]*/)?{re.escape(IN_KERNEL_MODULE)}(?:\.py\b|\.(\w+))?")


def said_as_the_graders(text: str) -> str:
    """``text`` with this module's name hidden, as a student reads it (the feedback's tracebacks,
    ``grader.report``; the changes a verdict names, ``grader.verdicts``): its file becomes "the
    grader's check", one of its names ``grader_sandbox.x`` "the grader's own x"."""
    return _IN_KERNEL_NAME.sub(lambda m: f"the grader's own {m[1]}" if m[1] else "the grader's check", text)


def code_folder(work: Path) -> str:
    """A folder in ``work`` that holds this module as ``IN_KERNEL_MODULE`` (a copy), for a run
    without the sandbox: the kernels find it there as they find it at ``grader.sandbox.IN_SANDBOX_CODE`` in one."""
    folder = Path(work) / "code"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(Path(__file__).resolve(), folder / f"{IN_KERNEL_MODULE}.py")
    return str(folder)


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
#: in-place comparison, the gradients, the no-grad modes, modules' hooks, ``Batch``, which
#: ``course_utils.data`` re-exports from ``course_utils.data.vocab``, where its methods find their
#: globals): compared again right after every call, so that a change that undoes itself when it is
#: first used (found by the red team: ``del torch.Tensor.all`` inside a patched ``all``) is seen.
QUICK = ("torch", "torch._tensor", "torch.autograd", "torch.autograd.grad_mode", "torch.utils._contextlib",
         "torch.nn.modules.module", "torch.nn.parameter", "course_utils.data", "course_utils.data.vocab")


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
    """``grader_sandbox.py run INPUT WORK TIME_LIMIT TIMEOUT OUTPUT_BYTES SANDBOXED RESULT_FD``: copy
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
# No program started from the kernel (a seccomp filter on every thread)
# --------------------------------------------------------------------------------------

def bpf_program(code: list, labels: dict[str, int]) -> bytes:
    """``code`` ((op, jt, jf, k), jumps given as labels) as a ``struct sock_filter`` array."""
    import struct
    out = b""
    for i, (op, jt, jf, k) in enumerate(code):
        jt = labels[jt] - i - 1 if isinstance(jt, str) else jt
        jf = labels[jf] - i - 1 if isinstance(jf, str) else jf
        assert 0 <= jt < 256 and 0 <= jf < 256
        out += struct.pack("=HBBI", op, jt, jf, k)
    return out


#: execve and execveat per architecture (audit arch -> numbers, as ``grader.sandbox``'s ``_SYSCALLS``), and the number of seccomp itself
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
    return bpf_program(code, labels)


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


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "run":
        sys.exit(runner_main(sys.argv[2:]))
    print(__doc__)
