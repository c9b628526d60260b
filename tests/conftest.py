"""Shared fixtures: every test runs in the fast profile, seeded, on one CPU thread.

Environment set here reaches the notebook kernels that nbval starts in the same run,
so nothing that changes how notebooks render (such as MPLBACKEND) belongs here.
"""

import os

os.environ.setdefault("COURSE_PROFILE", "fast")
os.environ.setdefault("COURSE_NUM_THREADS", "1")

import pytest  # noqa: E402

import course_utils  # noqa: E402,F401  (sets OMP_WAIT_POLICY before torch loads)


@pytest.fixture(autouse=True)
def _seeded():
    from course_utils.runtime import set_seed
    set_seed(0)
    yield


@pytest.fixture(scope="session")
def small_synthetic():
    """A small, uncached copy of the synthetic task (fast to generate)."""
    from course_utils.data import load_synthetic
    return load_synthetic(num_train=600, num_valid=100, num_test=100, seed=0, cache=False)


@pytest.fixture(scope="session")
def padded_batch(small_synthetic):
    """(training data, a batch of 8 pairs of mixed lengths, so with real padding)."""
    from course_utils.data import TranslationData
    data = TranslationData.build(small_synthetic.train)
    b = data.batches(8, shuffle=True, by_length=False)[0]
    assert (b.src_lengths < b.src.shape[1]).any()
    return data, b
