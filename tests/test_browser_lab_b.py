"""Notebooks run in JupyterLab in headless Chromium, offline (share 2 of 3; see browser.py)."""

import pytest

import browser

pytestmark = pytest.mark.integration  # `make integration` (Makefile)

lab, test_notebook_runs_in_jupyterlab_offline = browser.shard_tests(1)
