"""The course's grader: home assignments released, assembled, run and graded.

- ``grader.assignments``: release (student copies of assignments/source/), assembling a
  submission into the lecturer's notebook, grading one notebook or a class folder, the CSV
  and the feedback notebooks, and the command line (``python -m grader``; ``make
  assignments``, ``make grade``);
- ``grader.sandbox``: what runs inside the bubblewrap sandbox (the runner, the probes, the
  run-time check that torch was not patched) and the sandbox itself (bound into it as
  ``grader_sandbox.py``: it imports nothing of the course);
- ``grader.verdicts``: the verdicts of the questions judged outside the student's process
  (each assignment's ``checks.py`` builds on ``Question``);
- ``grader.answer_checks``: the reading of the answer cells (reference answers, hidden code,
  monkeypatches).

Not part of what a student installs to run the notebooks (docs/ARCHITECTURE.md).
"""
