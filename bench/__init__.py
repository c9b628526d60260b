"""The course's benchmark (``make bench``, ``python -m bench``): docs/BENCHMARKS.md and
docs/benchmarks.json. Installed with the course but never imported by it; what it compares
against (tokenizers, nbclient) is in the ``lab`` and ``test`` extras.

The modules, each importing only those above it in this list:

- ``bench.timing``: medians of repeated calls, and the machine;
- ``bench.reference``: the plain versions of the package's fast paths, kept as they were;
- ``bench.tuning``: what the tuning scripts share (a process pool over candidates and seeds,
  the table of a notebook's appendix);
- ``bench.notebooks``: notebooks' wall times (stored, or executed once more);
- ``bench.models``: the models of 01-04 (scores, tokens/s) and the training loop against a tight one;
- ``bench.kernels``: attention against torch's, BPE against tokenizers';
- ``bench.speedups``: the package's fast paths against ``bench.reference``;
- ``bench.report``: the markdown page rendered from the JSON report;
- ``bench.cli``: the command line (``python -m bench --parts ...``).

Importing it sets the environment of a measuring process, unless already set: the fast
profile, one CPU thread, the CPU on a GPU machine too (the tables are CPU measurements; the
package refuses CPU models beside a GPU otherwise); and it imports ``course_utils`` first,
which makes torch's threads wait without spinning before torch starts.
"""
import course_utils  # KERNEL_ENV's OMP_WAIT_POLICY, before torch loads

course_utils.use_check_env()   # course_utils/check.env: the fast profile, one thread, the CPU
