"""The learning-rate schedules every fit uses: known values, their shapes, bad inputs."""

import math

import pytest
import torch
from torch import nn

from course_utils.schedules import cosine_schedule, linear_factor, linear_schedule, noam_lr, warmup_scheduler


def _rates(scheduler, steps):
    """The learning rate of each of ``steps`` optimiser steps (as ``training.train`` steps it)."""
    optimizer, rates = scheduler.optimizer, []
    for _ in range(steps):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return rates


def _optimizer(lr=1.0):
    return torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=lr)


def test_noam_schedule_and_its_scheduler_form():
    d, warmup = 512, 4000
    assert noam_lr(1, d, warmup) == pytest.approx(d ** -0.5 * warmup ** -1.5)
    peak = noam_lr(warmup, d, warmup)
    assert peak == pytest.approx(d ** -0.5 * warmup ** -0.5)
    assert noam_lr(warmup - 1, d, warmup) < peak and noam_lr(warmup + 1, d, warmup) < peak
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=peak)
    sched = warmup_scheduler(opt, warmup)
    lrs = []
    for _ in range(6000):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    for step in (1, 100, 3999, 4000, 5999):
        assert lrs[step - 1] == pytest.approx(noam_lr(step, d, warmup), rel=1e-9)



def test_warmup_scheduler_without_warmup_and_with_cooldown():
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = warmup_scheduler(opt, 0, decay_after=4, total_steps=10, cooldown=4)
    lrs = []
    for _ in range(10):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    # full rate from step 1, 1/sqrt decay after step 4, linear fall towards 0 over the last 4
    expected = [1, 1, 1, 1, math.sqrt(4 / 5), math.sqrt(4 / 6), math.sqrt(4 / 7),
                math.sqrt(4 / 8) * 0.75, math.sqrt(4 / 9) * 0.5, math.sqrt(4 / 10) * 0.25]
    assert lrs == pytest.approx(expected)
    with pytest.raises(ValueError, match="cooldown needs total_steps"):
        warmup_scheduler(opt, 10, cooldown=5)


def test_noam_lr_refuses_step_zero():
    with pytest.raises(ValueError, match="step and warmup must be >= 1"):
        noam_lr(0, 512, 4000)


def test_cosine_schedule_warms_up_peaks_and_ends_at_zero():
    rates = _rates(cosine_schedule(_optimizer(2.0), warmup=4, steps=14), 14)
    assert rates[:4] == pytest.approx([0.5, 1.0, 1.5, 2.0])                     # (step + 1) / warmup
    assert rates[4:] == pytest.approx([1.0 + math.cos(math.pi * k / 10) for k in range(10)])
    assert rates[9] == pytest.approx(1.0)                                       # half-way down: half the peak
    assert all(a > b for a, b in zip(rates[4:], rates[5:]))
    assert _rates(cosine_schedule(_optimizer(), warmup=0, steps=4), 4)[0] == 1.0   # no warm-up: the peak first
    for warmup, steps in ((4, 4), (-1, 10)):
        with pytest.raises(ValueError, match=f"need 0 <= warmup < steps, got warmup={warmup}, steps={steps}"):
            cosine_schedule(_optimizer(), warmup, steps)


def test_linear_schedule_is_its_factor_and_stops_at_the_floor():
    rates = _rates(linear_schedule(_optimizer(0.5), warmup=10, steps=100, final=0.05), 100)
    assert rates == pytest.approx([0.5 * linear_factor(s, 10, 100, 0.05) for s in range(100)])
    assert linear_factor(0, 10, 100, 0.05) == pytest.approx(0.1)                 # 1/10 of the way up
    assert linear_factor(9, 10, 100, 0.05) == pytest.approx(1 - 9 / 100)         # the peak, already decaying
    assert linear_factor(99, 10, 100, 0.05) == pytest.approx(0.05)               # the floor (1 - 99/100 < 0.05)
    assert {linear_factor(s, 0, 100, 1.0) for s in range(100)} == {1.0}          # final 1.0: constant
    for args, shown in (((-1, 10, 0.5), "warmup=-1"), ((0, 0, 0.5), "steps=0"), ((0, 10, 0.0), "final=0.0")):
        with pytest.raises(ValueError, match=f"need warmup >= 0, steps >= 1 and 0 < final <= 1, got .*{shown}"):
            linear_schedule(_optimizer(), *args)
