"""``python -m grader release | grade ...``: the grader's command line (``grader.assignments.main``)."""

import sys

from grader.assignments import main

sys.exit(main())
