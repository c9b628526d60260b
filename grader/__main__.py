"""``python -m grader release | grade ...``: the grader's command line (``grader.cli.main``)."""
import sys

from grader.cli import main

sys.exit(main())
