"""course_utils.files.chapters: the one list of the course's notebooks in taught order, which every
script, test and benchmark reads (a notebook named otherwise, like 07b before it, was missed by
eleven globs of their own)."""

import re
from pathlib import Path

from course_utils.files import chapters

ROOT = Path(__file__).resolve().parent.parent


def test_the_course_s_chapters_in_taught_order():
    names = [p.stem for p in chapters()]
    assert names[:2] == ["00_welcome", "01_seq2seq_bottleneck"]
    assert names.index("05_bert") + 1 == names.index("05b_bert_finetuning")
    assert names.index("07_gpt") + 1 == names.index("07b_small_llm") == names.index("08_vision_transformer") - 1


def test_what_is_a_chapter_and_its_place(tmp_path):
    for name in ["10_next", "07b_llm", "07_gpt", "05b_bert_finetuning", "05_bert", "7_short", "07bb_two_letters",
                 "notes", "07b-dash"]:
        (tmp_path / f"{name}.ipynb").write_text("{}")
    (tmp_path / "08_text.md").write_text("")
    assert [p.stem for p in chapters(tmp_path)] == ["05_bert", "05b_bert_finetuning", "07_gpt", "07b_llm", "10_next"]


def test_no_other_file_lists_the_notebooks_with_a_glob_of_its_own():
    """Design, not accretion: a second definition is how 07b went missing."""
    pattern = re.compile(r"""glob\(\s*["']\[0-9\]\[0-9\]""")
    own = [p for folder in ("scripts", "tests", "bench", "course_utils", "grader") for p in (ROOT / folder).rglob("*.py")
           if p != ROOT / "course_utils" / "files.py" and pattern.search(p.read_text(encoding="utf-8"))]
    assert not own, f"these list the notebooks themselves; use course_utils.files.chapters(): {own}"
