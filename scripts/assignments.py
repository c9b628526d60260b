"""The grader's command line, kept at its old path: ``python scripts/assignments.py release |
grade ...`` is ``python -m grader release | grade ...`` (the grader is the package ``grader``)."""

import sys

from grader.assignments import main

if __name__ == "__main__":
    sys.exit(main())
