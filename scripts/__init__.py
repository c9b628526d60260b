"""The repository's command-line tools (data builders, notebook runners, slides, the book, the
checks of installs, devices and arithmetic), each run as ``python scripts/<name>.py`` or by a
``make`` target, three modules they and the tests share (``_shipping``, ``kernel_sockets``,
``softassert``), a pytest plugin the tests load (``cpu_by_file``) and the device check
(``device_check``: ``make device-check``, and a kernel start-up file and a pytest plugin the
tests switch on). A package only so that the
tests and the tools import each other by name (``from scripts import run_full``) with no
``sys.path`` edits: ``pip install -e .`` puts the project folder on ``sys.path``. The benchmark and the grader are packages of their own
(``bench``, ``grader``)."""
