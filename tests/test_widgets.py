import pytest
import torch

from course_utils.widgets import Walkthrough, attention_stepper, step_html


def _items():
    a = Walkthrough(["twenty", "-", "one", "<eos>"], ["ein", "und", "zwanzig", "<eos>"],
                    torch.tensor([[0.0, 0.1, 0.9, 0.0], [0.0, 0.8, 0.2, 0.0],
                                  [0.95, 0.05, 0.0, 0.0], [0.0, 0.0, 0.1, 0.9]]))
    b = Walkthrough(["seven", "<eos>"], ["sieben", "<eos>"], torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
    return [a, b]


def test_step_view_shows_the_current_word_and_the_most_attended_source_word():
    html = step_html(_items()[0], 2)
    assert "attends most to <b>twenty</b> (0.95)" in html
    assert 'ein und <b style="color: #c00">zwanzig</b>' in html
    with pytest.raises(IndexError, match=r"step must be in 0..3, got 4"):
        step_html(_items()[0], 4)


def test_stepper_reacts_to_slider_and_picker():
    box = attention_stepper(_items())
    assert box.slider.max == 3 and "attends most to <b>one</b>" in box.view.value
    box.slider.value = 1
    assert "attends most to <b>-</b> (0.80)" in box.view.value
    box.slider.value = 3
    box.picker.value = 1  # a shorter sentence: the slider shrinks and the view follows
    assert box.slider.max == 1 and box.slider.value == 1
    assert '<b style="color: #c00">&lt;eos&gt;</b>' in box.view.value
    assert "sieben" in box.view.value


def test_bad_walkthroughs():
    with pytest.raises(ValueError, match=r"weights must be \(output, source\) = \(1, 2\), got \(2, 2\)"):
        Walkthrough(["a", "b"], ["x"], torch.ones(2, 2))
    with pytest.raises(ValueError, match="at least one decoded sentence"):
        attention_stepper([])
