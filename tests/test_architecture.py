"""The package's layers (docs/ARCHITECTURE.md): every import of a course module runs down a
layer, never across or up, whether at the top of a module, inside a function or through a
string naming the module (``importlib.import_module``); the table in the document is the one list
of layers and names every module."""

import ast
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "course_utils"
DOCUMENT = ROOT / "docs" / "ARCHITECTURE.md"
#: imports that run up a layer today, with why (each one is debt: issue 37)
KNOWN_UPWARD: dict = {}


def _layers() -> dict[str, int]:
    layers = {}
    for number, cell in re.findall(r"^\|\s*(\d+)\s*\|\s*([^|]+)\|", DOCUMENT.read_text(), re.M):
        for name in re.findall(r"`(\w+)`", cell):
            assert name not in layers, f"{name} is in two layers of {DOCUMENT.name}"
            layers[name] = int(number)
    return layers


def _modules() -> list[str]:
    """The package's modules: its files and its subpackages (``data``), each one entry."""
    return sorted([p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"]
                  + [p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()])


def _files(module: str) -> list[Path]:
    """The file of a module, or every file of a subpackage."""
    folder = PACKAGE / module
    return sorted(folder.glob("*.py")) if folder.is_dir() else [PACKAGE / f"{module}.py"]


def _text(module: str) -> str:
    """The source of a module (of a subpackage: all its files)."""
    return "\n".join(path.read_text() for path in _files(module))


def _imports_of(path: Path, source: str | None = None) -> set[str]:
    """Every module a file (or ``source`` read as that file) imports, by its full dotted name
    (``from a import b`` gives ``a`` and ``a.b``), at the top or inside a function, a relative
    import resolved in the file's package, and a string that names a module of the repository
    (``importlib.import_module("course_utils.gpt")``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text() if source is None else source)):
        if isinstance(node, ast.ImportFrom):
            base = node.module if node.level == 0 else ".".join(filter(None, [path.parent.name, node.module]))
            if base:
                found.add(base)
                found.update(f"{base}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                re.fullmatch(r"(course_utils|grader|bench|scripts)\.\w+", node.value):
            found.add(node.value)
    return found


def _imports(module: str, source: str | None = None) -> set[str]:
    """The course modules ``module`` imports (its file, or ``source``), in any way a reading of
    its code can see."""
    names = (_imports_of(PACKAGE / f"{module}.py", source) if source is not None
             else set().union(*(_imports_of(path) for path in _files(module))))
    found = {name.split(".")[1] for name in names if name.startswith("course_utils.")}
    return {name for name in found if name in _modules() and name != module}


def test_the_table_names_every_module_once():
    assert sorted(_layers()) == _modules()


@pytest.mark.parametrize("module", _modules())
def test_imports_run_down_the_layers(module):
    layers = _layers()
    wrong = {other for other in _imports(module)
             if layers[other] >= layers[module] and (module, other) not in KNOWN_UPWARD}
    assert not wrong, (f"course_utils.{module} (layer {layers[module]}) imports "
                       + ", ".join(f"{w} (layer {layers[w]})" for w in sorted(wrong))
                       + f": move the code down, or the module up in {DOCUMENT.relative_to(ROOT)}")


def test_the_known_exceptions_are_still_there():
    """A debt paid off leaves KNOWN_UPWARD: the list says exactly what runs up today."""
    assert {(m, o) for m, o in KNOWN_UPWARD if o in _imports(m)} == set(KNOWN_UPWARD)


def test_the_check_sees_an_import_that_runs_up():
    """The reading finds all three kinds of import (it would pass vacuously otherwise)."""
    probe = ("\n\ndef _probe():\n    from course_utils import widgets\n    from .transformer import EncoderLayer\n"
             "    return importlib.import_module('course_utils.gpt')\n")
    assert _imports("attention") == {"checks"}
    assert _imports("attention", (PACKAGE / "attention.py").read_text() + probe) == {"checks", "widgets",
                                                                                   "transformer", "gpt"}


def test_the_kernel_settings_are_written_once():
    """The settings every kernel the course starts runs under live in course_utils.KERNEL_ENV;
    the grader, the browser test and the device check read them rather than restate them."""
    import re
    import course_utils
    assert course_utils.KERNEL_ENV == {"OMP_WAIT_POLICY": "PASSIVE", "HF_HUB_OFFLINE": "1",
                                       "TRANSFORMERS_OFFLINE": "1", "USE_HUB_KERNELS": "0", "PYTHONHASHSEED": "0"}
    restated = re.compile(r'"(OMP_WAIT_POLICY|HF_HUB_OFFLINE|TRANSFORMERS_OFFLINE|USE_HUB_KERNELS)"\s*:\s*"')
    # the code that starts kernels (tests that assert what a kernel saw may name the values)
    starters = [*(ROOT / "course_utils").rglob("*.py"), *(ROOT / "scripts").rglob("*.py"), *(ROOT / "grader").rglob("*.py"),
                ROOT / "tests" / "browser.py", ROOT / "tests" / "test_full_profile_smoke.py"]
    places = [p for p in starters if restated.search(p.read_text()) and p != ROOT / "course_utils" / "__init__.py"]
    assert not places, f"kernel settings restated in {[str(p.relative_to(ROOT)) for p in places]}"


def test_the_check_settings_are_written_once():
    """The fast profile, one thread and the CPU of every check live in course_utils/check.env:
    the Makefile's targets, conftest and bench read it (issue 68: it was restated ~20 times)."""
    import course_utils
    assert course_utils.CHECK_ENV == {"COURSE_PROFILE": "fast", "COURSE_NUM_THREADS": "1", "COURSE_DEVICE": "cpu"}
    restated = re.compile(r'COURSE_PROFILE=fast|COURSE_NUM_THREADS=1|"COURSE_PROFILE",\s*"fast"|"COURSE_DEVICE",\s*"cpu"')
    readers = [ROOT / "Makefile", ROOT / "tests" / "conftest.py", *(ROOT / "bench").glob("*.py"),
               ROOT / "scripts" / "deps_check.py"]
    places = [str(p.relative_to(ROOT)) for p in readers if restated.search(p.read_text())]
    assert not places, f"the check settings restated in {places} (use $(CHECK_ENV) / course_utils.use_check_env())"


def test_the_makefile_reads_the_kernel_settings_from_the_package():
    """The Makefile exports course_utils/kernel.env to every command it runs, whatever the
    calling shell set (``make test`` stays offline), and reads check.env for its checks,
    without naming one of the settings itself."""
    import shutil
    import subprocess
    import course_utils
    names = "|".join(course_utils.KERNEL_ENV)
    assert not re.search(rf"^\s*(export\s+)?({names})\s*[?:]?=", (ROOT / "Makefile").read_text(), re.M)
    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    show = "show: ; @echo " + " ".join(f"{k}=$${k}" for k in course_utils.KERNEL_ENV)
    env = {k: v for k, v in os.environ.items() if k not in course_utils.KERNEL_ENV}
    seen = subprocess.run(["make", "-s", "-C", str(ROOT), "--eval", show, "show"], env=env,
                          capture_output=True, text=True, timeout=60).stdout.split()
    assert seen == [f"{k}={v}" for k, v in course_utils.KERNEL_ENV.items()]
    forced = subprocess.run(["make", "-s", "-C", str(ROOT), "--eval", "show: ; @echo $$HF_HUB_OFFLINE", "show"],
                            env={**env, "HF_HUB_OFFLINE": "0"}, capture_output=True, text=True, timeout=60)
    assert forced.stdout.strip() == course_utils.KERNEL_ENV["HF_HUB_OFFLINE"]
    # read from the file, not through Python: a machine without a working Python still runs make
    checks = subprocess.run(["make", "-s", "-C", str(ROOT), "PYTHON=false", "--eval", "show: ; @echo $(CHECK_ENV)", "show"],
                            env=env, capture_output=True, text=True, timeout=60)
    assert checks.stdout.split() == [f"{k}={v}" for k, v in course_utils.CHECK_ENV.items()], checks.stderr
    cleaning = subprocess.run(["make", "-n", "-C", str(ROOT), "PYTHON=false", "clean"], env=env,
                              capture_output=True, text=True, timeout=60)
    assert cleaning.returncode == 0 and "rm -rf build" in cleaning.stdout


def test_the_package_finds_a_models_device_one_way():
    """A function of the package that trains or evaluates a model and needs its device asks
    ``runtime.check_device`` (which also refuses a model left on the CPU beside a GPU, and an
    input on another device), not ``next(model.parameters()).device`` again; and the
    learning-rate schedules live in ``schedules`` alone. (The views, ``translation_widgets``
    and ``pretraining_widgets``, draw a layer wherever it is: 04 shows a CPU layer's masks beside a GPU.)"""
    pattern = re.compile(r"next\(\s*\w+\.parameters\(\)\s*\)\.device")
    found = [f"{p.name}:{n}" for p in sorted(PACKAGE.rglob("*.py")) if p.name not in ("runtime.py", "translation_widgets.py", "pretraining_widgets.py")
             for n, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not found, f"a model's device found by hand (use runtime.check_device): {found}"
    scheduled = re.compile(r"lr_scheduler\.LambdaLR\(")
    elsewhere = [p.name for p in sorted(PACKAGE.rglob("*.py")) if p.name != "schedules.py" and scheduled.search(p.read_text())]
    assert not elsewhere, f"a learning-rate schedule built outside course_utils/schedules.py: {elsewhere}"


def test_the_package_holds_no_developer_tooling():
    """The device check (a GPU pretended on the CPU) is the course's developer tool, in
    scripts/device_check.py: no module of the package imports it, names it or switches it on
    (issue 68: it was course_utils.devicecheck, hooked from runtime.get_device and the widgets)."""
    named = re.compile(r"devicecheck|device_check|DeviceCheck|DeviceMistake|TorchFunctionMode")
    found = [f"{p.name}:{n}" for p in sorted(PACKAGE.rglob("*.py"))
             for n, line in enumerate(p.read_text().splitlines(), 1) if named.search(line)]
    assert not found, f"the device check named in course_utils: {found}"


def _drawn_imports(picture: int = 0, modules: list[str] | None = None) -> dict[str, set[str]]:
    """The import graph as docs/ARCHITECTURE.md draws it (``a & b --> c & d`` lines) in its
    ``picture``-th mermaid graph: 0 the package's, 1 the grader's."""
    graph = re.findall(r"```mermaid\n(.*?)```", DOCUMENT.read_text(), re.S)[picture]
    drawn = {module: set() for module in (_modules() if modules is None else modules)}
    for left, right in re.findall(r"^\s*([\w &]+?)\s*-->\s*([\w &]+?)\s*$", graph, re.M):
        for module in left.split("&"):
            drawn[module.strip()].update(other.strip() for other in right.split("&"))
    return drawn


def test_the_drawn_graph_is_the_import_graph():
    """The picture in the document is the package as it is: every arrow an import, every
    import an arrow."""
    actual = {module: _imports(module) for module in _modules()}
    wrong = {m: (sorted(_drawn_imports()[m] - actual[m]), sorted(actual[m] - _drawn_imports()[m]))
             for m in actual if _drawn_imports()[m] != actual[m]}
    assert not wrong, "module: (drawn but not imported, imported but not drawn): " + repr(wrong)


def test_the_book_documents_every_module():
    """book/api.md (the website's API page) has a section for every module of the package."""
    page = (ROOT / "book" / "api.md").read_text()
    documented = re.findall(r"^\.\. automodule:: course_utils\.(\w+)$", page, re.M)
    assert sorted(documented) == _modules(), f"missing: {sorted(set(_modules()) - set(documented))}"


# ---- the package data: modules of its own behind one name -------------------------------

def _data_order() -> list[str]:
    """The modules of ``course_utils.data`` in the order its ``__init__`` docstring lists them
    (``- ``course_utils.data.vocab``: ...``): each may import only those listed above it."""
    text = ast.get_docstring(ast.parse((PACKAGE / "data" / "__init__.py").read_text()))
    return re.findall(r"^- ``course_utils\.data\.(\w+)``", text, re.M)


def test_the_data_package_lists_every_module_once():
    listed = _data_order()
    files = sorted(p.stem for p in (PACKAGE / "data").glob("*.py") if p.stem != "__init__")
    assert sorted(listed) == files and len(set(listed)) == len(listed), (listed, files)


def test_the_data_modules_import_down_their_list():
    order = _data_order()
    wrong = [f"data.{module} imports data.{name.split('.')[2]}" for rank, module in enumerate(order)
             for name in _imports_of(PACKAGE / "data" / f"{module}.py")
             if name.startswith("course_utils.data.") and name.split(".")[2] in order
             and order.index(name.split(".")[2]) >= rank]
    assert not wrong, f"imports across or up the list in course_utils/data/__init__.py: {wrong}"


def _facade_imports(path: Path, source: str | None = None) -> list[str]:
    """The imports in a file that take a name from ``course_utils.data`` itself (its
    ``__init__``, which only re-exports) rather than from the module that defines it."""
    modules = set(_data_order())
    found = []
    for node in ast.walk(ast.parse(path.read_text() if source is None else source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "course_utils.data":
            found += [f"from course_utils.data import {a.name}" for a in node.names if a.name not in modules]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "course_utils":
            found += [f"from course_utils import {a.name}" for a in node.names if a.name == "data"]
        elif isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name == "course_utils.data"]
        elif isinstance(node, ast.Constant) and node.value == "course_utils.data":
            found.append(repr(node.value))
    return found


def test_the_package_imports_data_from_the_module_that_holds_it():
    """The notebooks, the assignments and the tools read ``data.<name>``; the package's own
    modules import each name from the module of ``course_utils.data`` that defines it (vit
    imports ``data.images``, not the vocabularies and the corpora), so an import says what a
    module uses."""
    wrong = [f"{p.relative_to(PACKAGE)}: {line}" for p in sorted(PACKAGE.rglob("*.py"))
             if p.parent.name != "data" for line in _facade_imports(p)]
    assert not wrong, wrong
    probe = "from course_utils.data import PAD_ID\nfrom course_utils.data.vocab import EOS_ID\nfrom course_utils import data\n"
    assert _facade_imports(PACKAGE / "vit.py", probe) == ["from course_utils.data import PAD_ID",
                                                          "from course_utils import data"]


# ---- the tools: the grader and the benchmark, packages in layers of their own ----------

TOOL_PACKAGES = ("grader", "bench")
#: which top-level code each part of the repository may import (the course never imports a tool)
MAY_IMPORT = {"course_utils": set(), "grader": {"course_utils"}, "bench": {"course_utils"},
              "scripts": {"course_utils", "grader", "bench"}}


def _tool_order(package: str) -> list[str]:
    """The modules of a tool package in the order its ``__init__`` docstring lists them
    (``- ``grader.cells``: ...``): each may import only those listed above it."""
    text = ast.get_docstring(ast.parse((ROOT / package / "__init__.py").read_text()))
    return re.findall(rf"^- ``{package}\.(\w+)``", text, re.M)


@pytest.mark.parametrize("package", TOOL_PACKAGES)
def test_a_tool_package_lists_every_module_once(package):
    listed = _tool_order(package)
    files = sorted(p.stem for p in (ROOT / package).glob("*.py") if p.stem not in ("__init__", "__main__"))
    assert sorted(listed) == files and len(set(listed)) == len(listed), (listed, files)


@pytest.mark.parametrize("package", TOOL_PACKAGES)
def test_a_tool_package_imports_run_down_its_list(package):
    order = _tool_order(package)
    wrong = []
    for rank, module in enumerate(order):
        for name in _imports_of(ROOT / package / f"{module}.py"):
            parts = name.split(".")
            if parts[0] == package and len(parts) > 1 and parts[1] in order and order.index(parts[1]) >= rank:
                wrong.append(f"{package}.{module} imports {package}.{parts[1]}")
    assert not wrong, f"imports across or up the list in {package}/__init__.py: {wrong}"


@pytest.mark.parametrize("part", sorted(MAY_IMPORT))
def test_the_parts_of_the_repository_import_one_way(part):
    """course_utils imports no tool; the grader and the benchmark import the course, never each
    other or scripts; scripts may use them all."""
    others = set(MAY_IMPORT) - {part} - MAY_IMPORT[part]
    wrong = sorted(f"{p.relative_to(ROOT)}: {name}" for p in (ROOT / part).rglob("*.py")
                   for name in _imports_of(p) if name.split(".")[0] in others)
    assert not wrong, wrong


def test_the_tool_checks_see_a_wrong_import():
    """Both readings find an import that runs the wrong way (they would pass vacuously otherwise)."""
    probe = "\n\ndef _probe():\n    from grader.batch import grade_folder\n    import bench.cli\n"
    cells = (ROOT / "grader" / "cells.py").read_text()
    assert {"grader.batch", "bench.cli"} <= _imports_of(ROOT / "grader" / "cells.py", cells + probe)
    assert _tool_order("grader")[0] == "cells" and _tool_order("grader").index("batch") > 0


def test_the_grader_is_drawn_as_it_imports():
    """The grader's picture in the document: every arrow an import inside the package, every
    such import an arrow."""
    order = _tool_order("grader")
    actual = {m: {name.split(".")[1] for name in _imports_of(ROOT / "grader" / f"{m}.py")
                  if name.startswith("grader.") and name.split(".")[1] in order} for m in order}
    drawn = _drawn_imports(1, order)
    assert drawn == actual, {m: (sorted(drawn[m] - actual[m]), sorted(actual[m] - drawn[m]))
                             for m in order if drawn[m] != actual[m]}


def test_the_repositorys_packages_are_the_ones_imported():
    """``scripts``, ``bench``, ``grader`` and ``course_utils`` are found in this checkout (the
    editable install puts it on the path after site-packages: a distribution that shipped a
    top-level package of one of these names would shadow ours)."""
    import importlib
    for name in ("course_utils", "grader", "bench", "scripts"):
        where = Path(importlib.import_module(name).__file__).resolve()
        assert where == ROOT / name / "__init__.py", f"{name} is imported from {where}, not from {ROOT}"


#: modules that still take a smoke test's cap from runtime rather than from a recipe, with why
#: (each one is debt: issue 68 wants the recipe to carry every cap)
KNOWN_SMOKE_READERS = {
    "data": "load_synthetic and es_en_splits cut the test split (data.splits.smoke_capped reads "
            "runtime.smoke_eval_size): the notebooks take their splits from data, not from a recipe",
    "decoding": "the decoders write at most runtime.SMOKE_DECODE_LEN tokens (cap_decode_len): the "
                "notebooks decode with the decoders' default length, not a recipe's",
}


def test_a_smoke_test_is_a_change_to_the_recipe():
    """runtime reads the smoke test's settings (COURSE_SMOKE_*) and recipes.recipe writes the
    caps into the recipe it returns: training, the fits and every other module use the numbers
    they are given, and name neither the variables nor runtime's readers of them."""
    smoke = re.compile(r"COURSE_SMOKE|\bsmoke_steps\b|\bsmoke_eval_size\b|\bcap_decode_len\b|\bSMOKE_DECODE_LEN\b")
    readers = {m for m in _modules() if smoke.search(_text(m))} - {"runtime"}
    assert readers == {"recipes", *KNOWN_SMOKE_READERS}, (
        f"course_utils modules that read the smoke test: {sorted(readers)}; only recipes.recipe "
        "may (it writes the caps into the recipe the notebook gets)")
