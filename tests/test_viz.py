import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from course_utils import viz  # noqa: E402
from course_utils.training import History  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_heatmap_puts_tokens_on_the_axes():
    w = torch.softmax(torch.randn(3, 4), dim=-1)
    ax = viz.attention_heatmap(w, ["a", "b", "c", "<eos>"], ["x", "y", "<eos>"], title="t")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c", "<eos>"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["x", "y", "<eos>"]
    np.testing.assert_allclose(ax.images[0].get_array(), w.numpy(), rtol=1e-6)
    assert ax.get_title() == "t" and ax.get_xlabel().startswith("source")


def test_heatmap_annotations_and_shape_errors():
    ax = viz.attention_heatmap(np.eye(2), annotate=True, colorbar=False)
    assert sorted(t.get_text() for t in ax.texts) == ["0.00", "0.00", "1.00", "1.00"]
    with pytest.raises(ValueError, match="x_tokens has 2 tokens but the weights have 3 columns"):
        viz.attention_heatmap(np.ones((2, 3)), ["a", "b"], ["x", "y"])
    with pytest.raises(ValueError, match=r"weights must have 2 dimensions, got shape \(2, 2, 2\)"):
        viz.attention_heatmap(np.ones((2, 2, 2)))


def test_heatmap_colours_run_from_0_to_1_unless_asked():
    w = np.array([[0.2, 0.1], [0.05, 0.3]])
    ax = viz.attention_heatmap(w)
    assert ax.images[0].get_clim() == (0.0, 1.0)        # comparable between figures
    assert ax.figure.axes[-1].get_ylabel() == "attention weight"
    assert viz.attention_heatmap(w, vmax=None, colorbar=False).images[0].get_clim() == (0.0, 0.3)
    with pytest.raises(ValueError, match="vmax must be a positive number or None, got 0"):
        viz.attention_heatmap(w, vmax=0)


def test_grid_has_one_panel_per_layer_and_head():
    w = torch.rand(2, 3, 4, 5)
    fig = viz.attention_grid(w, list("abcde"), list("wxyz"), title="grid")
    assert len(fig.axes) == 6 + 1                      # and the colour bar
    assert fig.axes[0].get_title() == "head 0" and fig.axes[3].get_ylabel() == "layer 1"
    assert fig.axes[-1].get_ylabel().startswith("attention weight")      # one shared colour bar
    assert min(t.get_fontsize() for t in fig.axes[0].get_yticklabels()) >= 8
    with pytest.raises(ValueError, match="4 dimensions"):
        viz.attention_grid(torch.rand(3, 4, 5))


def test_plot_history_and_by_length():
    h = History(steps=[1, 2, 3, 4], losses=[4.0, 3.0, 2.0, 1.0])
    ax = viz.plot_history({"gru": h}, smooth=2)
    np.testing.assert_allclose(ax.lines[0].get_ydata(), [4.0, 3.5, 2.5, 1.5])
    rows = [{"bucket": "0-9", "exact_match": 0.9, "bleu": 90.0},
            {"bucket": "10+", "exact_match": 0.5, "bleu": 50.0}]
    ax = viz.plot_by_length({"a": rows, "b": rows}, metric="exact_match")
    assert len(ax.lines) == 2
    np.testing.assert_allclose(ax.lines[0].get_ydata(), [90.0, 50.0])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0-9", "10+"]
    with pytest.raises(ValueError, match="metric must be"):
        viz.plot_by_length({"a": rows}, metric="accuracy")
    counted = [dict(r, count=n) for r, n in zip(rows, (120, 7))]
    ax = viz.plot_by_length({"a": counted})
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0-9\n(n=120)", "10+\n(n=7)"]
    other = [{"bucket": "0-4", "exact_match": 0.7, "bleu": 70.0}]  # another corpus's buckets
    with pytest.warns(UserWarning, match="leaves out 'es'"):
        ax = viz.plot_by_length({"a": rows, "es": other, "b": rows})
    assert [line.get_label() for line in ax.lines] == ["a", "b"]
    with pytest.raises(ValueError, match="has no recorded steps"):
        viz.plot_history(History())


def test_lecture_style_is_larger():
    viz.use_style(lecture=False)
    small = plt.rcParams["font.size"]
    viz.use_style(lecture=True)
    assert plt.rcParams["font.size"] > small
    viz.use_style(lecture=False)
    assert plt.rcParams["font.size"] == small


def test_length_histogram():
    ax = viz.length_histogram({"en": [3, 4, 4, 10], "de": [5, 5]})
    assert len(ax.patches) == 2 and ax.get_xlabel() == "length (words)" and ax.get_ylabel() == "sentences"
    counts = [p.get_path().vertices[:, 1].max() for p in ax.patches]
    assert counts == [2, 2]                                  # the tallest bins: two 4s, two 5s
    ax = viz.length_histogram({"verses": [1, 2]}, unit="pieces", counted="verses")
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("length (pieces)", "verses")


def test_style_outside_ipython_keeps_the_main_module():
    # set_matplotlib_formats outside IPython creates a shell that replaces __main__, and a
    # script's process pool (scripts/tune_transformer.py) then lost its own functions
    script = ("import sys; main = sys.modules['__main__']\n"
              "from course_utils import viz; viz.use_style()\n"
              "print(sys.modules['__main__'] is main)")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parent.parent)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"
