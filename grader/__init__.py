"""The course's grader: home assignments released, assembled, run and graded, offline.

Each assignment is one nbgrader *source* notebook, ``assignments/source/<name>/<name>.ipynb``,
whose cells carry nbgrader metadata (``grade``, ``solution``, ``locked``, ``grade_id``,
``points``): answer cells hold the solution between ``### BEGIN SOLUTION`` and ``### END
SOLUTION``; test cells hold visible ``assert``s and, between ``### BEGIN HIDDEN TESTS`` and
``### END HIDDEN TESTS``, the hidden ones. The notebooks therefore also work in a full
nbgrader course (``nbgrader generate_assignment`` / ``autograde``).

``release`` runs nbgrader's own preprocessors (ClearSolutions, ClearHiddenTests,
ClearOutput, LockCells, ComputeChecksums), which need no course directory or database,
and writes ``assignments/release/<name>/<name>.ipynb``. ``assignments/release/MANIFEST.sha256``
records what it wrote; a release file that differs from it (a student or a lecturer edited
it) is never overwritten: the command names the file and stops, unless ``--force``.

``grade`` trusts nothing of the submission but its answer cells, and judges what they do,
not how they are written. It takes the source notebook (hidden tests included), puts the
student's answer cells into it by ``grade_id``, sets ``skip_training = True`` (the model is
loaded from the checkpoint the student handed in, ``<checkpoint>.pt`` beside the submission;
without one the questions on the trained model score 0), and runs it offline with nbclient (fast
profile, one CPU thread) in a bubblewrap sandbox of its own (``grader.sandbox``; what runs in
it, ``grader.inside``):

- **the references are not there**: the course package in the sandbox is a copy in which every
  reference answer of the assignment is a tripwire (``grader.student_side``), the libraries that
  implement it (``tokenizers``, ``transformers``) are empty folders, the torch operations it lists
  are refused where they run (the dispatcher sees ``aten::_scaled_dot_product_*``, ``im2col``, ...
  however they were reached), and the reference checkpoint is never copied in;
- **the sandbox owns its resources**: no view of the repository, the other submissions or the
  grader; a private, size-limited tmpfs for its work folder; a user of its own with no
  capabilities and no user namespaces (a seccomp filter); as root a cgroup per sandbox (one
  CPU's share, its memory, its processes) whose CPU *time* the time limit counts;
- **nothing of the student's runs in the grader's process**: a notebook is read with ``ast``
  only; a handed-in checkpoint is checked against the reference state dict's names, shapes,
  dtypes and sizes (contiguous tensors, a byte limit) before anything reads it, and is loaded in
  the sandbox; results come back through a pipe only the runner holds, and bwrap's own status
  channel says whether the sandbox started.

Every question is judged outside the sandbox (``grader.verdicts``, from the assignment's
``checks.py``): a probe calls the student's functions on the grader's inputs and sends back
plain data, which the grader compares with the reference answers it computes itself.
``answer_checks`` reads the answer cells for what only text can show, a reference answer
named in the code: such a finding caps the question it is in (0 points) and goes to the review
column of ``grades.csv``; no other question is touched. A handed-in checkpoint with the
reference weights, or one whose model computes the reference model's function
(``output_distance`` under ``NEAR_REFERENCE_OUTPUTS``: noise added, units permuted, a
temperature), scores 0 on its question.

A folder is one class of one assignment (``--assignment``, default: the one most notebooks
are); it is graded several submissions at a time, each in its sandbox; each row is its own
(whatever goes wrong with one, ``SystemExit`` included, is that row's error; a notebook of
another assignment is an error row), and ``grades.csv`` is always written (cells a spreadsheet
would run escaped), with one feedback notebook per student (no hidden test in it) and
``similar_pairs.csv``: pairs whose answer code is near-identical, or whose trained models agree far
more closely than two trainings do, for the lecturer to compare.

Leaves out: the nbgrader gradebook database, late penalties, manual grading, feedback
HTML (use a full nbgrader course for those; the notebooks are compatible).

The modules, each importing only those above it in this list:

- ``grader.cells``: where the source notebooks are; what nbgrader's metadata says a cell is;
  ``AssignmentError``;
- ``grader.release``: the student versions and their manifest (``make assignments``);
- ``grader.answer_checks``: the reading of the answer cells (a reference answer named in the text);
- ``grader.student_side``: what the sandbox holds instead of the references (the course package
  with tripwires, the absent libraries, the refused torch operations);
- ``grader.assemble``: a submission read, recognised and put into the source notebook;
- ``grader.checkpoints``: handed-in checkpoints read safely and told apart from the reference;
- ``grader.inside``: what runs inside the sandbox (the runner, the probes, the run-time check
  that torch was not patched, the refused operations; bound into it alone as
  ``grader_sandbox.py``: it imports nothing of the grader or the course);
- ``grader.sandbox``: the bubblewrap sandbox itself, started from the grader (its view, its
  limits, its seccomp filter and cgroup, the wait and what comes back);
- ``grader.verdicts``: the verdicts of the questions judged outside the student's process
  (each assignment's ``checks.py`` builds on ``Question``);
- ``grader.run``: one submission graded (``grade``, ``Result``);
- ``grader.report``: ``grades.csv`` and the feedback notebooks;
- ``grader.batch``: a class folder graded (``grade_folder``);
- ``grader.cli``: the command line (``python -m grader``; ``make assignments``, ``make grade``).

Installed with the course but never imported by it; what it needs beyond the course (nbgrader,
nbclient) is in the ``test`` extra (docs/ARCHITECTURE.md).
"""
