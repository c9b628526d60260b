"""The device check: run any notebook or script on a CPU as if a CUDA GPU were there, and
stop at the first device mistake that would fail (or silently run on the CPU) on one.

Switched on by ``COURSE_DEVICE=check``: ``runtime.get_device()`` (so ``setup()``) then answers
``cuda`` and installs ``DeviceCheck``, a ``torch.overrides.TorchFunctionMode`` that sees
every torch call. The arithmetic stays on the CPU; the mode only remembers which tensors a
GPU would hold (those made with ``device=device``, moved with ``.to(device)`` /
``.cuda()``, or computed from such tensors) and answers ``tensor.device`` for them with
``cuda:0``. What a GPU would refuse, it refuses, with the line of the notebook cell or
script, the shapes, both devices and the fix:

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

Taught in: 00_welcome (how the course checks itself). Leaves out: several GPUs, MPS.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import threading
import types
import weakref
from contextlib import contextmanager

import torch
from torch.overrides import TorchFunctionMode

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
    package_dir = os.path.dirname(os.path.abspath(__file__))
    here = os.path.abspath(__file__)
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


_THREAD = threading.local()   # .entered: the check is on this thread's stack of torch modes


@contextmanager
def on_this_thread():
    """Run a block under the installed check also when it runs on another thread than the
    one that installed it (a no-op without the check, or on that thread). Torch function
    modes are per thread, and JupyterLab 4.6 sends a widget's messages over a kernel
    subshell, which ipykernel 7 serves on a thread of its own: without this, a widget's
    callback there ran unchecked while the tensors it met were marked as on the device."""
    check = _ACTIVE
    if check is None or getattr(_THREAD, "entered", False):
        yield
        return
    _THREAD.entered = True
    try:
        with check:
            yield
    finally:
        _THREAD.entered = False


def requested() -> bool:
    """True when ``$COURSE_DEVICE`` asks for the check."""
    return os.environ.get("COURSE_DEVICE", "").strip().lower() == "check"


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
    _THREAD.entered = True
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
        if torch.cuda.is_available():         # a real GPU beside the check (never in the course)
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
