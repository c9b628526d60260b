"""The device check: run the course on this CPU as if a CUDA GPU were there, and stop at the
first device mistake that would fail (or silently run on the CPU) on one. A developer tool
of the course, not part of what it teaches: ``course_utils`` neither imports nor names it.

``install()`` switches it on for the rest of a process: ``torch.cuda.is_available()`` answers
True, so ``runtime.get_device()`` (so ``setup()``) answers ``cuda`` as on a GPU machine, and
``DeviceCheck``, a ``torch.overrides.TorchFunctionMode``, sees every torch call, on the
thread that installed it and on every thread started afterwards (a widget's callback runs on
a kernel subshell's thread: JupyterLab 4.6 and ipykernel 7). The arithmetic stays on the
CPU; the mode only remembers which tensors a GPU would hold (those made with
``device=device``, moved with ``.to(device)`` / ``.cuda()``, or computed from such tensors)
and answers ``tensor.device`` for them with ``cuda:0``. What a GPU would refuse, it
refuses, with the line of the notebook cell or script, the shapes, both devices and the fix:

- a tensor on the CPU (``torch.tensor``, ``arange``, ``zeros`` without ``device=``, a batch
  or a mask never moved) meeting a tensor on the device in one operation (CPU scalars of
  0 dimensions are allowed, as on a GPU, and so are CPU indices of a GPU tensor and the
  CPU lengths of ``pack_padded_sequence``);
- a model with parameters on the CPU that is trained (an optimiser steps over them) or
  called on a batch on the device; moving it on purpose (``model.cpu()``,
  ``model.to("cpu")``) says that this is meant and is allowed (the course's ``train``,
  decoders and scorers also refuse a model left on the CPU: ``runtime.check_device``);
- ``.numpy()``, ``np.asarray``, a plot (matplotlib calls ``np.asarray``) of a tensor on the
  device;
- random numbers made on the device from a ``torch.Generator`` of the CPU, or the reverse;
- ``torch.load(..., map_location=device)`` works (the tensors come back on the device).

``Tensor.pin_memory`` and ``torch.cuda.synchronize`` become no-ops. What the check cannot
see: work that never goes through torch (pure NumPy), and speed: code that is right here
can still be slow on a GPU (per-step ``.item()``): see docs/BENCHMARKS.md.

How it is switched on (one module, three doors):

- ``make device-check`` (``python scripts/device_check.py [--only ...] [paths ...]``): every
  notebook, every assignment's source notebook in the full profile with 2 training steps per
  run (soft asserts, as the smoke run), and the entry point of every script that trains, with
  small arguments; nothing in the repository is written. Exit status 1 at the first mistake
  (or any other error), with the cell or line, the shapes and the fix.
- a kernel: ``kernel_env(ipython_dir)`` writes an IPython start-up file that calls
  ``install()`` and returns the environment to start kernels with (``IPYTHONDIR`` and
  ``COURSE_DEVICE=cuda``): nbclient, nbval and JupyterLab kernels all run IPython's start-up
  files. Without the file (or if it failed), ``setup()`` stops at "COURSE_DEVICE=cuda but
  torch sees no CUDA GPU" rather than run unchecked on the CPU.
- pytest: ``pytest -p scripts.device_check`` (``make unit-check``) installs it in every test
  process (xdist's workers too) and unsets ``COURSE_DEVICE``, so that the ``device`` fixture
  is the pretended GPU; a process a test starts runs on the CPU, unchecked.

``COURSE_DEVICE=check`` is not a switch: ``runtime.get_device()`` refuses it, naming this tool.
Leaves out: several GPUs, MPS.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import types
import weakref
from pathlib import Path

import course_utils  # KERNEL_ENV (and OMP_WAIT_POLICY before torch loads)
import torch
from torch.overrides import TorchFunctionMode

from course_utils.files import chapters
from course_utils.runtime import SMOKE_EVAL_DEFAULT

ROOT = Path(__file__).resolve().parent.parent
#: the package whose frames are not where a mistake is (a call into it names its caller too)
PACKAGE_DIR = os.path.dirname(os.path.abspath(course_utils.__file__))

#: the device the check pretends to have
DEVICE = torch.device("cuda", 0)
CPU = torch.device("cpu")

# torch functions whose outputs keep the device of their inputs but may take CPU tensors
# beside device ones, as they do on a GPU (indices, packing lengths, RNN batch sizes)
_CPU_INDEX_OK = {"__getitem__", "__setitem__", "index_put_", "index_put"}
_CPU_LENGTHS_OK = {"_pack_padded_sequence", "_pad_packed_sequence", "gru", "lstm", "rnn_tanh", "rnn_relu"}
# torch functions that take tensors of any two devices (copies, questions about metadata)
_ANY_DEVICES_OK = {"copy_", "_has_compatible_shallow_copy_type", "is_same_size", "is_set_to", "swap_tensors"}
# torch functions whose other arguments hold unrelated tensors (deepcopy's memo): the device
# of the first argument decides
_SELF_ONLY = {"__deepcopy__", "__reduce_ex__", "__setstate__"}
# outputs that a GPU keeps on the CPU: (name, index of the output)
_CPU_OUTPUTS = {("_pack_padded_sequence", 1), ("_pad_packed_sequence", 1)}


class DeviceMistake(RuntimeError):
    """A device mistake found by the check (what a GPU would fail on, or run on the CPU)."""


def _is_generator_on_device(generator) -> bool:
    return isinstance(generator, _DeviceGenerator)


class _DeviceGenerator(torch.Generator):
    """What ``torch.Generator(device="cuda")`` gives under the check: a CPU generator that
    remembers it stands for the device's."""

    @property
    def device(self):
        return DEVICE


def _user_frame() -> str:
    """Where the mistake is: the innermost frame outside the libraries and this module, as
    'Cell In[N], line L' for a notebook cell or 'path:line' for a file; when that is inside
    course_utils, also the first caller outside it (the cell or script that called it)."""
    package_dir, here = PACKAGE_DIR, os.path.abspath(__file__)
    libraries = tuple({os.path.abspath(p) + os.sep for p in (sysconfig.get_paths()["stdlib"],
                       sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
                       os.path.dirname(os.path.dirname(os.path.abspath(torch.__file__))))})
    inner = outer = None
    frame = sys._getframe(1)
    while frame is not None:  # library frames (torch, matplotlib, the standard library) are skipped
        name = frame.f_code.co_filename
        path = os.path.abspath(name) if not name.startswith("<") else name
        if path != here and not path.startswith(libraries):
            inner = inner or frame
            if not path.startswith(package_dir + os.sep):
                outer = frame
                break
        frame = frame.f_back
    if inner is None:
        return "?"
    if outer is None or outer is inner:
        return _describe(inner)
    return f"{_describe(inner)} (called from {_describe(outer)})"


def _describe(frame) -> str:
    filename, line = frame.f_code.co_filename, frame.f_lineno
    try:  # IPython's cells have names like /tmp/ipykernel_1/123.py: say 'Cell In[N]'
        from IPython import get_ipython
        ip = get_ipython()
        number = getattr(getattr(ip, "compile", None), "_filename_map", {}).get(filename) if ip else None
        if number is not None:
            return f"Cell In[{number}], line {line}"
    except ImportError:
        pass
    return f"{filename}:{line}"


def _shape(t) -> str:
    return f"{tuple(t.shape)} {str(t.dtype).replace('torch.', '')}"


def _tensors_in(obj, out: list) -> list:
    """The tensors in ``obj`` and in the lists, tuples and dicts it nests (what torch
    functions take and return): pytree's ``tree_flatten`` does the same at several times
    the cost, and this runs on every torch call under the check."""
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            _tensors_in(item, out)
    elif isinstance(obj, dict):
        for item in obj.values():
            _tensors_in(item, out)
    return out


class DeviceCheck(TorchFunctionMode):
    """Tracks which tensors a GPU would hold and refuses what a GPU would refuse."""

    def __init__(self):
        super().__init__()
        self._on_device: dict[int, weakref.ref] = {}
        self._explicit_cpu: dict[int, weakref.ref] = {}
        self.operations = 0  # torch calls seen (a measure of coverage)

    # -- which tensors are "on the device" --------------------------------------------------
    @staticmethod
    def _has(table, t) -> bool:
        ref = table.get(id(t))
        return ref is not None and ref() is t

    @staticmethod
    def _put(table, t) -> None:
        key = id(t)
        table[key] = weakref.ref(t, lambda _r, key=key, table=table: table.pop(key, None))

    @staticmethod
    def _drop(table, t) -> None:
        if DeviceCheck._has(table, t):
            table.pop(id(t), None)

    def on_device(self, t) -> bool:
        """True when ``t`` would be on the GPU."""
        return torch.is_tensor(t) and self._has(self._on_device, t)

    def _mark(self, t, on_device: bool, explicit_cpu: bool = False) -> None:
        if not torch.is_tensor(t):
            return
        if on_device:
            self._put(self._on_device, t)
            self._drop(self._explicit_cpu, t)
        else:
            self._drop(self._on_device, t)
            if explicit_cpu:
                self._put(self._explicit_cpu, t)

    # -- the mode ---------------------------------------------------------------------------
    def __torch_function__(self, func, types_, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.operations += 1
        owner = getattr(func, "__self__", None)
        if isinstance(owner, types.GetSetDescriptorType):
            return self._attribute(func, owner.__name__, args)
        name = getattr(func, "__name__", "")
        if name == "to" and args and torch.is_tensor(args[0]):
            return self._to(func, args, kwargs)
        if name in ("cuda", "cpu") and args and torch.is_tensor(args[0]) and owner is None:
            opts = {"memory_format": kwargs["memory_format"]} if "memory_format" in kwargs else {}
            return self._move(args[0], DEVICE if name == "cuda" else CPU, opts)
        if name in ("numpy", "__array__") and args and self.on_device(args[0]):
            raise DeviceMistake(
                f"{_user_frame()}: {name}() of a tensor {_shape(args[0])} on {DEVICE}: NumPy (and "
                "matplotlib, which calls np.asarray) reads CPU memory only; move it first: "
                "tensor.detach().cpu().numpy()")
        if name == "pin_memory" and args and torch.is_tensor(args[0]):
            return args[0]  # needs a GPU build; nothing to check
        if "device" in kwargs and name != "device":
            return self._factory(func, name, args, kwargs)
        return self._generic(func, name, args, kwargs)

    def _attribute(self, func, attr, args):
        t = args[0]
        if attr == "device" and func.__name__ == "__get__":
            return DEVICE if self.on_device(t) else func(*args)
        if attr == "is_cuda" and func.__name__ == "__get__":
            return self.on_device(t)
        if attr == "is_cpu" and func.__name__ == "__get__":
            return not self.on_device(t)
        if attr == "data" and func.__name__ == "__set__":  # param.data = moved (Module.to)
            func(*args)
            value = args[1]
            self._mark(t, self.on_device(value), explicit_cpu=self._has(self._explicit_cpu, value))
            return None
        out = func(*args)
        if attr in ("grad", "data", "T", "mT", "H", "mH", "real", "imag") and func.__name__ == "__get__":
            if torch.is_tensor(out) and self.on_device(t):
                self._mark(out, True)
        if attr == "grad" and func.__name__ == "__set__" and torch.is_tensor(args[1]):
            if self.on_device(t) != self.on_device(args[1]):
                raise DeviceMistake(f"{_user_frame()}: a gradient on {self._device_of(args[1])} given to a "
                                    f"tensor on {self._device_of(t)}; move it first")
        return out

    def _device_of(self, t):
        return DEVICE if self.on_device(t) else CPU

    def _to(self, func, args, kwargs):
        t, rest = args[0], args[1:]
        if rest and torch.is_tensor(rest[0]):  # t.to(other): other's device and dtype
            target, dtype, memory_format = self._device_of(rest[0]), rest[0].dtype, None
        else:
            target, dtype, _, memory_format = torch._C._nn._parse_to(*rest, **kwargs)
        opts = {k: v for k, v in (("dtype", dtype), ("memory_format", memory_format)) if v is not None}
        if kwargs.get("copy"):
            opts["copy"] = True
        if target is None:  # a dtype change only: it stays where it is
            out = t.to(**opts) if opts else t
            if out is not t:
                self._mark(out, self.on_device(t))
            return out
        return self._move(t, torch.device(target), opts)

    def _move(self, t, target, opts):
        if target.type == "meta":
            return t.to("meta", **opts)
        if target.type not in ("cuda", "cpu"):
            raise DeviceMistake(f"{_user_frame()}: the check pretends a CUDA GPU; moving a tensor to "
                                f"{target} is not what a CUDA machine can do")
        to_device = target.type == "cuda"
        if to_device == self.on_device(t):  # already there: torch returns the tensor itself
            out = t.to(**opts) if opts else t
        else:  # another device is another copy of the memory
            out = t.to(**{**opts, "copy": True})
        if out is not t or not to_device:
            self._mark(out, to_device, explicit_cpu=not to_device)
        return out

    def _factory(self, func, name, args, kwargs):
        device = kwargs["device"]
        if device is None:
            return self._generic(func, name, args, kwargs)
        device = torch.device(device) if not isinstance(device, torch.device) else device
        if device.type == "meta":  # shapes without memory (how transformers builds a model before loading)
            return func(*args, **kwargs)
        if device.type not in ("cuda", "cpu"):
            raise DeviceMistake(f"{_user_frame()}: {name}(device={device}) under a check that pretends "
                                "a CUDA GPU")
        generator = kwargs.get("generator")
        if generator is not None and _is_generator_on_device(generator) != (device.type == "cuda"):
            where = DEVICE if _is_generator_on_device(generator) else CPU
            raise DeviceMistake(
                f"{_user_frame()}: {name}(..., device={device}) draws from a torch.Generator on {where}; "
                f"a GPU refuses this. Draw on the generator's device and move the result "
                f"({name}(..., generator=g).to(device)), or make the generator on {device}")
        kwargs = {**kwargs, "device": CPU}
        return self._generic(func, name, args, kwargs, target=device.type == "cuda")

    def _generic(self, func, name, args, kwargs, target: bool | None = None):
        """Run ``func``; ``target``: whether its outputs are on the device (None: where its
        inputs are, after the check that they are in one place)."""
        tensors = _tensors_in(args[:1] if name in _SELF_ONLY else (args, kwargs), [])
        on = [t for t in tensors if self.on_device(t)]
        if target is None:
            generator = kwargs.get("generator")
            if generator is not None and _is_generator_on_device(generator) and not on:
                raise DeviceMistake(f"{_user_frame()}: {name}() on the CPU draws from a torch.Generator on "
                                    f"{DEVICE}; a GPU refuses this")
        if on and target is None:
            off = [t for t in tensors if not self.on_device(t) and t.dim() > 0]
            if off:
                self._allow_or_raise(name, args, on, off)
        out = func(*args, **kwargs)
        if target if target is not None else on:
            for i, o in enumerate(_tensors_in(out, [])):
                if (name, i) not in _CPU_OUTPUTS:
                    self._mark(o, True)
        return out

    def _allow_or_raise(self, name, args, on, off) -> None:
        if name == "__setitem__" or (name in _CPU_INDEX_OK and args and self.on_device(args[0])):
            return  # a GPU tensor indexed by (or assigned) CPU tensors: torch moves them
        if name in _CPU_LENGTHS_OK and all(t.dtype == torch.int64 and t.dim() == 1 for t in off):
            return  # lengths / batch sizes: torch wants them on the CPU
        if name in _ANY_DEVICES_OK:
            return
        a, b = on[0], off[0]
        raise DeviceMistake(
            f"{_user_frame()}: {name}() got a tensor {_shape(a)} on {DEVICE} and a tensor "
            f"{_shape(b)} on {CPU}; a GPU refuses to mix them. Make the second one on the device "
            f"(torch.zeros(..., device=device), torch.arange(n, device=x.device)) or move it "
            f"(mask.to(device), batch.to(device) - and keep the result: x = x.to(device))")

    # -- models ---------------------------------------------------------------------------
    def _stray(self, params) -> list:
        return [p for p in params if p is not None and not self.on_device(p) and not self._has(self._explicit_cpu, p)]

    def module_pre_hook(self, module, args):
        """A model whose parameters stayed on the CPU, called on a batch on the device (the
        message torch would give names an operation deep inside; this one names the model)."""
        if not any(self.on_device(t) for t in _tensors_in(args, [])):
            return None  # small CPU demos (a layer on random numbers) are fine on a GPU machine
        stray = self._stray(module._parameters.values())
        if stray:
            raise DeviceMistake(
                f"{_user_frame()}: {type(module).__name__} is called on a batch on {DEVICE} with a "
                f"parameter {_shape(stray[0])} on {CPU}. Move the model first: model.to(device)")
        return None

    def optimizer_pre_hook(self, optimizer, args, kwargs):
        """An optimiser stepping over parameters on the CPU: the model trains there, slowly."""
        # only parameters with a gradient are trained (an optimiser over a dummy parameter that
        # only traces a learning-rate schedule trains nothing)
        stray = self._stray(p for group in optimizer.param_groups for p in group["params"]
                            if p.grad is not None)
        if stray:
            raise DeviceMistake(
                f"{_user_frame()}: {type(optimizer).__name__}.step() updates a parameter "
                f"{_shape(stray[0])} on {CPU} while the device is {DEVICE}: the model would train on "
                f"the CPU. Move the model before making its optimiser: model.to(device) (or "
                f"model.cpu() if the CPU is meant)")
        return None


_ACTIVE: DeviceCheck | None = None


def active() -> DeviceCheck | None:
    """The installed check, or None."""
    return _ACTIVE


def install() -> DeviceCheck:
    """Switch the check on for the rest of the process (idempotent); returns it."""
    global _ACTIVE
    if _ACTIVE is not None:
        return _ACTIVE
    import warnings
    warnings.filterwarnings("ignore", message="PyTorch was compiled without cuDNN")  # rnn.py asks cuDNN
    # tensors answer is_cuda=True: on a CUDA build torch would then pick cuDNN kernels for them
    torch.backends.cudnn.enabled = False
    check = DeviceCheck()
    check.__enter__()
    # torch's function modes are per thread: every thread started from now on runs under the
    # check too (a widget's callback runs on a kernel subshell's thread, started when JupyterLab
    # opens the subshell; before this, 07's sampler made its mistake there unseen). The thread
    # leaves it before it ends: a mode left on a dying thread's stack can abort the process.
    real_bootstrap = threading.Thread._bootstrap_inner

    def bootstrap_under_check(thread):
        with check:
            real_bootstrap(thread)

    threading.Thread._bootstrap_inner = bootstrap_under_check
    torch.nn.modules.module.register_module_forward_pre_hook(check.module_pre_hook)
    from torch.optim.optimizer import register_optimizer_step_pre_hook
    register_optimizer_step_pre_hook(check.optimizer_pre_hook)
    _patch_torch(check)
    _ACTIVE = check
    return check


#: what only a real GPU can answer; a library that asks has gone down a path for CUDA hardware
_HARDWARE_QUERIES = ("get_device_capability", "get_device_properties", "get_device_name", "mem_get_info")


def _asking_library() -> str:
    """The top-level package of the innermost caller outside torch and this module."""
    torch_dir = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
    frame = sys._getframe(2)
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if path != os.path.abspath(__file__) and not path.startswith(torch_dir):
            for root in (sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]):
                if path.startswith(os.path.abspath(root) + os.sep):
                    return path[len(os.path.abspath(root)) + 1:].split(os.sep)[0]
            return _describe(frame)
        frame = frame.f_back
    return "?"


def _hardware_query(name: str, real):
    """torch.cuda.<name> under the check: the pretended GPU has no hardware to describe, so a
    caller that asks (a library choosing CUDA kernels by compute capability) is stopped with
    its name, instead of failing deep inside torch with 'Torch not compiled with CUDA'."""

    def query(*args, **kwargs):
        if _REAL_IS_AVAILABLE():              # a real GPU beside the check (never in the course)
            return real(*args, **kwargs)
        who = _asking_library()
        raise DeviceMistake(
            f"{who} asked torch.cuda.{name}() under the device check, which pretends a CUDA GPU on "
            f"this CPU and has no hardware to describe: {who} is taking a path for CUDA hardware "
            "that this check cannot follow. Switch that path off for the course's processes "
            "(as course_utils.KERNEL_ENV does with USE_HUB_KERNELS=0 for transformers' Hub "
            "kernels), or keep the library's work on the CPU.")

    query.__wrapped__ = real
    return query


#: whether torch sees a real GPU (the check makes ``torch.cuda.is_available`` answer True)
_REAL_IS_AVAILABLE = torch.cuda.is_available


def _patch_torch(check: DeviceCheck) -> None:
    real_load, real_generator = torch.load, torch.Generator

    def load(f, map_location=None, *args, **kwargs):
        target = map_location
        if isinstance(target, (str, torch.device)) and torch.device(target).type == "cuda":
            out = real_load(f, *args, map_location="cpu", **kwargs)
            for t in _tensors_in(out, []):
                check._mark(t, True)
            return out
        return real_load(f, *args, map_location=map_location, **kwargs)

    class _GeneratorType(type):  # isinstance(g, torch.Generator) keeps working
        def __instancecheck__(cls, obj):
            return isinstance(obj, real_generator)

        def __subclasscheck__(cls, sub):
            return issubclass(sub, real_generator)

        def __call__(cls, device="cpu"):
            device = torch.device(device)
            return _DeviceGenerator() if device.type == "cuda" else real_generator(device)

    class generator(metaclass=_GeneratorType):
        """torch.Generator under the device check: device='cuda' gives a stand-in."""

    real_parameter_new = torch.nn.Parameter.__new__

    def parameter_new(cls, data=None, requires_grad=True):  # nn.Parameter(t) is where t is
        param = real_parameter_new(cls, data, requires_grad)
        if data is not None and check.on_device(data):
            check._mark(param, True)
        return param

    torch.nn.Parameter.__new__ = staticmethod(parameter_new)
    load.__doc__, load.__wrapped__ = real_load.__doc__, real_load
    torch.load = load
    torch.Generator = generator
    for name in ("synchronize", "empty_cache", "reset_peak_memory_stats"):
        setattr(torch.cuda, name, lambda *a, **k: None)
    for name in _HARDWARE_QUERIES:
        setattr(torch.cuda, name, _hardware_query(name, getattr(torch.cuda, name)))
    torch.cuda.max_memory_allocated = lambda *a, **k: 0
    torch.cuda.memory_allocated = lambda *a, **k: 0
    torch.cuda.manual_seed = torch.cuda.manual_seed_all = lambda *a, **k: None
    torch.cuda.is_available = lambda: True    # runtime.get_device() answers cuda, as on a GPU


# ---- the doors: a kernel's start-up file, a script's launcher, a pytest plugin -------------

#: the line that switches the check on in a process (a kernel's start-up file, a script's launcher)
SWITCH_ON = "__import__('scripts.device_check').device_check.install()"


def kernel_env(ipython_dir: Path) -> dict:
    """Write IPython's start-up file that switches the check on into ``ipython_dir`` (its
    default profile; other start-up files there stay) and return the environment a kernel
    started under it needs: ``IPYTHONDIR`` and ``COURSE_DEVICE=cuda``, the device the check
    pretends (a kernel whose start-up file did not run stops at ``setup()``: no CUDA GPU)."""
    startup = Path(ipython_dir) / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    (startup / "00-device-check.py").write_text(f"# the device check (scripts/device_check.py)\n{SWITCH_ON}\n")
    return {"IPYTHONDIR": str(ipython_dir), "COURSE_DEVICE": "cuda"}


def pytest_configure(config):
    """``pytest -p scripts.device_check``: the tests as on a GPU (``make unit-check``). The
    check is process-wide: on before any test runs, so that what it refuses does not depend
    on which test came first; ``COURSE_DEVICE`` unset (conftest sets the CPU), so that
    ``runtime.get_device()``, the ``device`` fixture, is the pretended GPU."""
    install()
    os.environ.pop("COURSE_DEVICE", None)


# ---- `make device-check` ---------------------------------------------------------------------

STEPS, EVAL = 2, SMOKE_EVAL_DEFAULT
#: The notebooks take their steps from a recipe, which COURSE_SMOKE_STEPS caps
#: (``recipes.recipe``); the assignments and the tuning scripts train for budgets of their own
#: (the graded checkpoints', the candidates'), which this code, run before them, caps instead.
STEP_CAP = f"""
import course_utils.training as _training
_uncapped_train = _training.train
def _capped_train(*args, max_steps=None, **kwargs):
    return _uncapped_train(*args, max_steps={STEPS} if max_steps is None else min(max_steps, {STEPS}), **kwargs)
_training.train = _capped_train
"""
#: scripts that train, and the arguments that keep them small (their output goes to OUT)
SCRIPT_RUNS = {
    "pretrain_small_bert.py": ["--steps", str(STEPS), "--pairs", "400", "--out-dir", "{out}"],
    "pretrain_small_gpt.py": ["--steps", str(STEPS), "--out-dir", "{out}"],
    "train_es_en_attention.py": ["--out-dir", "{out}"],   # its recipe's steps, capped at STEPS
}
#: scripts whose entry point is run(label, changes, seed) over a process pool: the check
#: calls run() once, for the first candidate
TUNING_SCRIPTS = ("compare_attention", "tune_convs2s", "tune_transformer")


def environment(out: Path) -> dict:
    return {**os.environ, "COURSE_SMOKE_STEPS": str(STEPS),
            "COURSE_SMOKE_EVAL": str(EVAL), "COURSE_NUM_THREADS": os.environ.get("COURSE_NUM_THREADS", "1"),
            "COURSE_RESULTS_DIR": str(out / "results"), "MPLBACKEND": "agg", **course_utils.KERNEL_ENV,
            "PYTHONPATH": str(ROOT), **kernel_env(out / "ipython")}


#: the assignments' hidden tests index the test split up to 500 pairs
ASSIGNMENT_EVAL = 1000


def check_notebook(path: Path, env: dict, profile: str = "full") -> tuple[bool, str]:
    """Execute a copy of ``path`` under the check; (ok, what happened)."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    from scripts.softassert import SOFT_ASSERTS

    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(SOFT_ASSERTS))
    if "assignments" in path.parts:
        nb.cells.insert(1, nbformat.v4.new_code_cell(STEP_CAP))
    # run in a copy of the notebook's folder: an assignment's source notebook saves its
    # checkpoint beside itself, and nothing in the repository may change
    import shutil
    work = Path(tempfile.mkdtemp(prefix="device-check-nb-"))
    shutil.copytree(path.parent, work / path.parent.name, ignore=shutil.ignore_patterns("*.ipynb"))
    saved = dict(os.environ)
    os.environ.update({**env, "COURSE_PROFILE": profile})  # the kernel inherits this environment
    if "assignments" in path.parts:
        os.environ["COURSE_SMOKE_EVAL"] = str(ASSIGNMENT_EVAL)
    try:
        client = NotebookClient(nb, timeout=600, kernel_name="python3",
                                resources={"metadata": {"path": str(work / path.parent.name)}})
        client.execute()
    except CellExecutionError as error:
        text = str(error)
        cell = next((i for i, c in enumerate(nb.cells) if c.get("cell_type") == "code" and any(
            o.get("output_type") == "error" for o in c.get("outputs", []))), None)
        where = f"cell {cell - 1} (0-based, in the stored notebook)" if cell is not None else "a cell"
        kind = "DEVICE MISTAKE" if "DeviceMistake" in text else "ERROR"
        return False, f"{kind} in {path.relative_to(ROOT)}, {where}:\n{_tail(text)}"
    finally:
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(work, ignore_errors=True)
    return True, f"ok  {path.relative_to(ROOT)}"


def _tail(text: str, lines: int = 25) -> str:
    import re
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return "\n".join(text.strip().splitlines()[-lines:])


def check_script(name: str, env: dict, out: Path) -> tuple[bool, str]:
    """Run a training script's entry point under the check; (ok, what happened)."""
    if name in SCRIPT_RUNS:
        argv = [str(ROOT / "scripts" / name), *[a.format(out=out) for a in SCRIPT_RUNS[name]]]
        code = f"import runpy, sys; sys.argv = {argv!r}; runpy.run_path(sys.argv[0], run_name='__main__')"
    else:
        code = (f"{STEP_CAP}\nfrom scripts import {name} as m; "
                f"label, changes, seeds = m.CANDIDATES[0]; print(m.run(label, changes, seeds[0]))")
    cmd = [sys.executable, "-c", f"{SWITCH_ON}\n{code}"]
    result = subprocess.run(cmd, env=env, cwd=out, capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        kind = "DEVICE MISTAKE" if "DeviceMistake" in result.stderr else "ERROR"
        return False, f"{kind} in scripts/{name if name.endswith('.py') else name + '.py'}:\n{_tail(result.stderr)}"
    return True, f"ok  scripts/{name if name.endswith('.py') else name + '.py'}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, help="notebooks to check (default: all)")
    parser.add_argument("--keep-going", action="store_true", help="check everything, then report")
    parser.add_argument("--only", default="notebooks,assignments,scripts",
                        help="comma-separated parts: notebooks, assignments, scripts")
    args = parser.parse_args(argv)
    parts = {p.strip() for p in args.only.split(",") if p.strip()}
    unknown = parts - {"notebooks", "assignments", "scripts"}
    if unknown:
        parser.error(f"--only takes notebooks, assignments, scripts; got {sorted(unknown)}")
    if args.paths:
        missing = [str(p) for p in args.paths if not p.exists()]
        if missing:
            parser.error(f"no such notebook: {', '.join(missing)}")
        notebooks, assignments, scripts = [p.resolve() for p in args.paths], [], []
    else:
        notebooks = chapters() if "notebooks" in parts else []
        assignments = sorted((ROOT / "assignments" / "source").glob("*/*.ipynb")) if "assignments" in parts else []
        scripts = [*SCRIPT_RUNS, *TUNING_SCRIPTS] if "scripts" in parts else []
    start, failures = time.perf_counter(), 0
    with tempfile.TemporaryDirectory(prefix="device-check-") as tmp:
        out = Path(tmp)
        env = environment(out)
        print(f"device check (a CUDA GPU pretended on the CPU, {STEPS} training "
              f"steps per run): {len(notebooks)} notebooks, {len(assignments)} assignments, "
              f"{len(scripts)} scripts", flush=True)
        checks = [lambda p=p: check_notebook(p, env) for p in [*notebooks, *assignments]]
        checks += [lambda name=name: check_script(name, env, out) for name in scripts]
        for check in checks:
            started = time.perf_counter()
            ok, text = check()
            print(f"{text}  ({time.perf_counter() - started:.0f} s)", flush=True)
            if not ok:
                failures += 1
                if not args.keep_going:
                    return 1
    if failures:
        print(f"device check: {failures} failed, in {time.perf_counter() - start:.0f} s")
        return 1
    print(f"device check: no mistakes in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
