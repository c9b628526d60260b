"""`make device-check`: run the course on this CPU as if a CUDA GPU were there
(``COURSE_DEVICE=check``, course_utils/devicecheck.py) and stop at the first device
mistake: every notebook and every assignment's source notebook in the full profile with
2 training steps per run (soft asserts, as the smoke run), and the entry point of every
script that trains, with small arguments. Nothing in the repository is written (results,
checkpoints and tables go to a temporary folder).

Usage: python scripts/device_check.py [--only notebooks,assignments,scripts] [paths ...]
(paths: notebooks or assignment notebooks to check instead of all). Exit status 1 at the
first mistake (or any other error), with the cell or line, the shapes and the fix.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
import course_utils  # KERNEL_ENV
from course_utils.runtime import SMOKE_EVAL_DEFAULT
from course_utils.files import chapters

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
    return {**os.environ, "COURSE_DEVICE": "check", "COURSE_SMOKE_STEPS": str(STEPS),
            "COURSE_SMOKE_EVAL": str(EVAL), "COURSE_NUM_THREADS": os.environ.get("COURSE_NUM_THREADS", "1"),
            "COURSE_RESULTS_DIR": str(out / "results"), "MPLBACKEND": "agg", **course_utils.KERNEL_ENV,
            "PYTHONPATH": str(ROOT)}


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
        cmd = [sys.executable, str(ROOT / "scripts" / name), *[a.format(out=out) for a in SCRIPT_RUNS[name]]]
    else:
        code = (f"{STEP_CAP}\nfrom scripts import {name} as m; "
                f"label, changes, seeds = m.CANDIDATES[0]; print(m.run(label, changes, seeds[0]))")
        cmd = [sys.executable, "-c", code]
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
        print(f"device check (COURSE_DEVICE=check: a CUDA GPU pretended on the CPU, {STEPS} training "
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
