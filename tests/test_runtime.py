import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import course_utils
from course_utils import runtime


def test_set_seed_makes_torch_numpy_and_python_repeat():
    import random
    runtime.set_seed(123)
    a = (torch.rand(3), np.random.rand(3), random.random())
    runtime.set_seed(123)
    b = (torch.rand(3), np.random.rand(3), random.random())
    torch.testing.assert_close(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert a[2] == b[2]
    runtime.set_seed(124)
    assert not torch.equal(torch.rand(3), a[0])


@pytest.mark.parametrize("bad", [1.5, "0", None, True])
def test_set_seed_rejects_non_int(bad):
    with pytest.raises(TypeError, match="seed must be an int"):
        runtime.set_seed(bad)


def test_profile_from_environment(monkeypatch):
    monkeypatch.setenv("COURSE_PROFILE", "full")
    assert runtime.profile() == "full"
    assert runtime.pick(1, 2) == 2
    monkeypatch.setenv("COURSE_PROFILE", " FAST ")
    assert runtime.profile() == "fast"
    assert runtime.pick(1, 2) == 1


def test_profile_defaults_to_device(monkeypatch):
    monkeypatch.delenv("COURSE_PROFILE", raising=False)
    assert runtime.profile(torch.device("cpu")) == "fast"
    assert runtime.profile(torch.device("cuda")) == "full"


def test_bad_profile_names_the_choices(monkeypatch):
    monkeypatch.setenv("COURSE_PROFILE", "medium")
    with pytest.raises(ValueError, match=r"one of \('fast', 'full'\), got 'medium'"):
        runtime.profile()


def test_device_on_this_machine_is_usable():
    device = runtime.get_device()
    assert device.type in ("cpu", "cuda", "mps")
    assert (torch.ones(2, device=device) * 2).sum().item() == 4


def test_setup_returns_and_prints_summary(capsys, monkeypatch):
    monkeypatch.setenv("COURSE_NUM_THREADS", "1")
    summary = runtime.setup(seed=7)
    out = capsys.readouterr().out
    assert summary.seed == 7 and summary.profile == "fast" and summary.num_threads == 1
    assert torch.get_num_threads() == 1
    assert torch.are_deterministic_algorithms_enabled()
    assert f"torch {torch.__version__}" in out and "profile: fast" in out
    assert summary.as_dict()["device"] == str(runtime.get_device())
    # seeded: the same draw as set_seed(7)
    x = torch.rand(2)
    runtime.set_seed(7)
    torch.testing.assert_close(x, torch.rand(2))


def test_thread_override_is_validated(monkeypatch):
    monkeypatch.setenv("COURSE_NUM_THREADS", "zero")
    with pytest.raises(ValueError, match="COURSE_NUM_THREADS must be a positive int, got 'zero'"):
        runtime.configure_threads()
    monkeypatch.setenv("COURSE_NUM_THREADS", "0")
    with pytest.raises(ValueError, match="positive int"):
        runtime.configure_threads()


@pytest.mark.parametrize("torch_saw, expected", [(None, "all"), ("PASSIVE", "all"), ("", 1), ("active", 1)],
                         ids=["course_utils first", "torch first, passive", "torch first, unset",
                              "torch first, active"])
def test_thread_choice_depends_on_what_torch_saw_not_on_import_order(monkeypatch, torch_saw, expected):
    monkeypatch.delenv("COURSE_NUM_THREADS", raising=False)
    monkeypatch.setattr(course_utils, "OMP_POLICY_TORCH_SAW", torch_saw)
    monkeypatch.setattr(runtime, "_usable_cores", lambda: 4)
    threads, note = runtime.thread_choice()
    if expected == "all":
        assert (threads, note) == (4, "")
    else:
        assert threads == 1 and "instead of 4" in note and "Import course_utils first" in note
        monkeypatch.setattr(runtime, "_usable_cores", lambda: 1)   # one core: nothing to warn about
        assert runtime.thread_choice() == (1, "")
    monkeypatch.setenv("COURSE_NUM_THREADS", "3")                   # the override always wins
    assert runtime.thread_choice() == (3, "")


@pytest.mark.parametrize("first", ["torch", "course_utils"])
def test_setup_summary_in_a_fresh_interpreter_says_the_thread_count(first):
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "COURSE_NUM_THREADS")}
    other = "course_utils" if first == "torch" else "torch"
    code = (f"import {first}, {other}; from course_utils import runtime; "
            "runtime._usable_cores = lambda: 2; s = runtime.setup(); print('THREADS', s.num_threads)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert "CPU threads:" in out
    if first == "torch":
        assert "THREADS 1" in out and "NOTE: 1 CPU thread instead of 2" in out
    else:
        assert "THREADS 2" in out and "NOTE" not in out


def test_import_sets_passive_wait_policy():
    assert os.environ["OMP_WAIT_POLICY"].upper() == "PASSIVE"


def test_import_is_lazy():
    import subprocess
    import sys
    code = ("import sys, course_utils; assert 'torch' not in sys.modules, 'torch imported eagerly'; "
            "course_utils.data; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"


def test_smoke_knob_caps_test_sets(monkeypatch):
    """(What a smoke test does to the recipes: tests/test_recipes.py.)"""
    monkeypatch.delenv("COURSE_SMOKE_STEPS", raising=False)
    monkeypatch.delenv("COURSE_SMOKE_EVAL", raising=False)
    assert runtime.smoke_steps() is None and runtime.smoke_eval_size() is None
    monkeypatch.setenv("COURSE_SMOKE_EVAL", "10")
    assert runtime.smoke_eval_size() is None, "COURSE_SMOKE_EVAL alone is no smoke test"
    monkeypatch.setenv("COURSE_SMOKE_STEPS", "3")
    monkeypatch.delenv("COURSE_SMOKE_EVAL")
    assert runtime.smoke_steps() == 3 and runtime.smoke_eval_size() == 128
    monkeypatch.setenv("COURSE_SMOKE_EVAL", "10")
    assert runtime.smoke_eval_size() == 10
    from course_utils import data
    splits = data.load_synthetic(num_train=30, num_valid=20, num_test=20, cache=False)
    assert (len(splits.train), len(splits.valid), len(splits.test)) == (30, 20, 10)


@pytest.mark.parametrize("bad", ["0", "-2", "two"])
def test_bad_smoke_values_name_the_variable(monkeypatch, bad):
    monkeypatch.setenv("COURSE_SMOKE_STEPS", bad)
    with pytest.raises(ValueError, match="COURSE_SMOKE_STEPS must be a positive int"):
        runtime.smoke_steps()


def test_course_device_overrides_and_is_validated(monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    assert runtime.get_device() == torch.device("cpu")
    monkeypatch.setenv("COURSE_DEVICE", "gpu")
    with pytest.raises(ValueError, match="COURSE_DEVICE must be cpu, cuda, cuda:N or mps, got 'gpu'"):
        runtime.get_device()
    # the device check is a developer tool that switches itself on: asked for by this name
    # alone, the package refuses and names the tool
    monkeypatch.setenv("COURSE_DEVICE", "check")
    with pytest.raises(ValueError, match="got 'check' .*device check: make device-check"):
        runtime.get_device()
    if not torch.cuda.is_available():
        monkeypatch.setenv("COURSE_DEVICE", "cuda")
        with pytest.raises(ValueError, match="no CUDA GPU"):
            runtime.get_device()


def test_course_setup_sets_the_figure_style_and_runtime_leaves_views_alone():
    """runtime sets up the environment only; course_utils.setup (the notebooks' first cell)
    adds the figure style, with large fonts for a projector."""
    code = ("import sys, course_utils\nfrom course_utils import runtime\n"
            "runtime.setup(verbose=False)\nprint('MPL', 'matplotlib' in sys.modules)\n"
            "s = course_utils.setup(verbose=False, lecture=True)\nimport matplotlib as m\n"
            "print('LECTURE', s.lecture, m.rcParams['font.size'])\n"
            "course_utils.setup(verbose=False, lecture=False)\nprint('SCREEN', m.rcParams['font.size'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "COURSE_LECTURE": "0"}).stdout
    from course_utils import viz
    assert "MPL False" in out, out
    assert f"LECTURE True {float(viz.STYLES[True]['font.size'])}" in out, out
    assert f"SCREEN {float(viz.STYLES[False]['font.size'])}" in out, out


def test_the_thread_count_reaches_numpys_and_scipys_blas():
    # in a fresh interpreter (the limit is process-wide): numpy's OpenBLAS, loaded before
    # setup(), is limited by threadpoolctl; scipy's, loaded after, by the variable
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "COURSE_NUM_THREADS")}
    env["COURSE_NUM_THREADS"] = "1"
    code = ("import numpy, course_utils; from course_utils import runtime; runtime._usable_cores = lambda: 2; "
            "runtime.setup(); import scipy.linalg, threadpoolctl, json; "
            "print('BLAS', json.dumps(sorted({(i['filepath'], i['num_threads']) for i in "
            "threadpoolctl.threadpool_info() if i['user_api'] == 'blas'})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    import json
    blas = json.loads(out.split("BLAS", 1)[1])
    assert blas and all(threads == 1 for _, threads in blas), blas
    assert len(blas) >= 2, blas          # numpy's and scipy's own OpenBLAS, both limited
