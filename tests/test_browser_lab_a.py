"""Notebooks run in JupyterLab in headless Chromium, offline (share 1 of 3; see browser.py)."""

import pytest

import browser

pytestmark = pytest.mark.skipif(bool(browser.missing_browser()), reason=str(browser.missing_browser()))
NAMES = browser.shard(0)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    yield from browser.lab_session(NAMES, tmp_path_factory)


@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_in_jupyterlab_offline(lab, name):
    context, server, blocked = lab
    report = browser.check_notebook_in_lab(context, server, name)
    print(report)
    assert not report["page_errors"], f"{name}: uncaught errors in the page: {report['page_errors']}"
    assert not blocked, f"{name}: the page tried to reach the network: {blocked[:5]}"
