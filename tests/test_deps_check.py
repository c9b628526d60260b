"""The drift check's report (scripts/deps_check.py): what moved against the lock, and what
failed, read from real lock text and real pytest output."""

import pytest

from scripts import deps_check, lock


def test_drift_names_moved_new_and_gone_packages(monkeypatch, tmp_path):
    locked = ("numpy==2.4.6 ; python_full_version < '3.12' \\\n    --hash=sha256:aa\n"
              "numpy==2.5.5 ; python_full_version >= '3.12' \\\n    --hash=sha256:bb\n"
              "tqdm==4.67.1 \\\n    --hash=sha256:cc\nsix==1.17.0 \\\n    --hash=sha256:dd\n")
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements" / "dev.txt").write_text(locked)
    monkeypatch.setattr(deps_check, "ROOT", tmp_path)
    env = {"python_full_version": "3.11.7"}
    assert lock.pins(locked, env) == {"numpy": "2.4.6", "tqdm": "4.67.1", "six": "1.17.0"}
    now = {"numpy": "2.4.6", "tqdm": "4.68.0", "kernels": "0.20.0", "torch": "2.13.0", "course-utils": "0.1.0"}
    moved, new, gone = deps_check.drift(now)
    assert moved == ["tqdm 4.67.1 -> 4.68.0"]
    assert new == ["kernels 0.20.0"]                 # torch and the course itself are not drift
    assert gone == ["six"]


def test_the_report_quotes_the_failing_tests():
    log = ("....F.\nFAILED tests/test_bert.py::test_mlm - AssertionError: 0.1\n"
           "ERROR notebooks/05_bert.ipynb::Cell 3\n1 failed, 5 passed\n")
    assert deps_check.failures(log).splitlines() == [
        "FAILED tests/test_bert.py::test_mlm - AssertionError: 0.1", "ERROR notebooks/05_bert.ipynb::Cell 3"]


def test_an_unknown_stage_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="unit"):
        deps_check.stage_commands("lint")
    with pytest.raises(SystemExit):
        deps_check.main(["--stages", "lint"])
