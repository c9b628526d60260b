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

``grade`` trusts nothing of the submission but its answer cells: it takes the source
notebook (hidden tests included), puts the student's answer cells into it by
``grade_id``, sets ``skip_training = True`` (the model is loaded from a checkpoint instead
of trained: ``<checkpoint>.pt`` beside the submission if the student handed one in, else
the reference one shipped in ``assignments/source/<name>/``, and the questions on the
trained model score 0), runs it offline with nbclient (fast profile, one CPU thread) in a
bubblewrap sandbox of its own (``grader.sandbox``: no view of the repository, the
other submissions or the grader; limits on memory, processes, files, output and time).
The questions an assignment's ``checks.py`` lists are judged outside the sandbox
(``grader.verdicts``): their test cells run only their visible part, a probe calls
the student's functions on the grader's inputs and sends back plain data, and the grader
compares it with the reference answers it computes itself. The other test cells count as
nbgrader counts them: a test cell that raises (or writes to stderr) scores 0, one that
runs scores its points. Before that, ``answer_checks`` reads the answer cells: an answer
cell that uses a reference answer (``course_utils`` beyond what the read-only cells hand out,
or a library implementation the source's metadata lists), imports a module outside its
allow-list, hides code or monkeypatches what the tests use costs its question and every later one.
A folder is graded several submissions at a time, each in its sandbox, each stopped at a
time limit; whatever goes wrong with one is that row's error; the result is ``grades.csv``
(cells a spreadsheet would run escaped) and one feedback notebook per student (no hidden
test in it). A handed-in checkpoint with the reference weights, or one whose model computes
the reference model's function (``output_distance`` under ``NEAR_REFERENCE_OUTPUTS``: noise
added, units permuted, a temperature), scores 0 on its question.

Leaves out: the nbgrader gradebook database, late penalties, manual grading, feedback
HTML (use a full nbgrader course for those; the notebooks are compatible).

The modules, each importing only those above it in this list:

- ``grader.cells``: where the source notebooks are; what nbgrader's metadata says a cell is;
  ``AssignmentError``;
- ``grader.release``: the student versions and their manifest (``make assignments``);
- ``grader.answer_checks``: the reading of the answer cells (reference answers, hidden code,
  monkeypatches);
- ``grader.assemble``: a submission read, recognised and put into the source notebook;
- ``grader.checkpoints``: handed-in checkpoints read safely and told apart from the reference;
- ``grader.sandbox``: what runs inside the bubblewrap sandbox (the runner, the probes, the
  run-time check that torch was not patched) and the sandbox itself (bound into it as
  ``grader_sandbox.py``: it imports nothing of the course);
- ``grader.verdicts``: the verdicts of the questions judged outside the student's process
  (each assignment's ``checks.py`` builds on ``Question``);
- ``grader.run``: one submission graded (``grade``, ``Result``);
- ``grader.report``: ``grades.csv`` and the feedback notebooks;
- ``grader.batch``: a class folder graded (``grade_folder``);
- ``grader.cli``: the command line (``python -m grader``; ``make assignments``, ``make grade``).

Installed with the course but never imported by it; what it needs beyond the course (nbgrader,
nbclient) is in the ``test`` extra (docs/ARCHITECTURE.md).
"""
