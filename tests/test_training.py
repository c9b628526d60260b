from dataclasses import dataclass

import pytest
import torch
from torch import nn

from course_utils.data import PAD_ID, TranslationData
from course_utils.training import (CheckpointMismatchError, History, count_parameters, load_model, predictions,
                                   linear_decay, load_checkpoint, save_checkpoint, train)


@dataclass
class TinyConfig:
    vocab_size: int
    emb: int = 16
    hidden: int = 32


class TinyDecoderLM(nn.Module):
    """A GRU decoder started from the final state of a GRU encoder (enough to exercise the loop)."""

    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.emb = nn.Embedding(cfg.vocab_size, cfg.emb, padding_idx=PAD_ID)
        self.enc = nn.GRU(cfg.emb, cfg.hidden, batch_first=True)
        self.rnn = nn.GRU(cfg.emb, cfg.hidden, batch_first=True)
        self.out = nn.Linear(cfg.hidden, cfg.vocab_size)

    def forward(self, tgt_in, src=None):
        state = self.enc(self.emb(src))[1] if src is not None else None  # (1, batch, hidden)
        return self.out(self.rnn(self.emb(tgt_in), state)[0])  # (batch, len, vocab)


def lm_loss(model, batch, ratio=None):
    logits = model(batch.tgt[:, :-1], batch.src.clamp(max=model.emb.num_embeddings - 1))
    return nn.functional.cross_entropy(logits.transpose(1, 2), batch.tgt[:, 1:], ignore_index=PAD_ID)


@pytest.fixture
def one_batch(small_synthetic):
    data = TranslationData.build(small_synthetic.train)
    return data, data.batches(batch_size=16)[5]


def test_tiny_model_overfits_one_batch(one_batch, device):
    data, batch = one_batch
    model = TinyDecoderLM(TinyConfig(max(len(data.src_vocab), len(data.tgt_vocab)), hidden=64)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    history = train(model, [batch], lm_loss, opt, max_steps=300, progress=False)
    assert history.num_steps == 300 and history.stopped_by == "steps"
    assert history.losses[0] > 3.0  # about log(vocab) at the start
    assert history.losses[-1] < 0.05 * history.losses[0]
    assert history.tokens == 300 * batch.num_tokens
    assert all(n >= 0 for n in history.grad_norms)


def test_epochs_teacher_forcing_schedule_and_validation(one_batch, device):
    data, batch = one_batch
    model = TinyDecoderLM(TinyConfig(len(data.tgt_vocab))).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    seen = []

    def loss_fn(model, b, ratio):
        seen.append(ratio)
        return lm_loss(model, b)

    calls = []

    def valid_fn(m):
        calls.append(m.training)
        return {"valid_loss": lm_loss(m, batch.to(device)).item()}

    history = train(model, [batch, batch], loss_fn, opt, num_epochs=3,
                    teacher_forcing=linear_decay(1.0, 0.0), valid_fn=valid_fn, valid_every=2,
                    progress=False)
    assert history.stopped_by == "epochs" and history.num_steps == 6
    assert seen == pytest.approx([1.0, 0.8, 0.6, 0.4, 0.2, 0.0])
    assert history.teacher_forcing == seen
    assert [row["step"] for row in history.valid] == [2, 4, 6]
    assert calls == [False, False, False] and model.training  # eval inside, train after
    assert 0 < history.valid_seconds < history.seconds


def test_callable_batches_are_called_per_epoch(one_batch, device):
    _, batch = one_batch
    model = TinyDecoderLM(TinyConfig(200)).to(device)
    epochs = []

    def batches(epoch):
        epochs.append(epoch)
        return [batch]

    train(model, batches, lm_loss, torch.optim.SGD(model.parameters(), lr=0.01), num_epochs=3,
          progress=False)
    assert epochs == [0, 1, 2]


def test_time_budget_stops_training(one_batch, device):
    _, batch = one_batch
    model = TinyDecoderLM(TinyConfig(200)).to(device)
    history = train(model, [batch], lm_loss, torch.optim.SGD(model.parameters(), lr=0.01),
                    time_budget=0.3, progress=False)
    assert history.stopped_by == "time budget"
    assert 0.3 <= history.seconds < 3.0 and history.num_steps >= 1


def test_gradient_clipping_bounds_the_update(one_batch, device):
    _, batch = one_batch
    torch.manual_seed(0)
    model = TinyDecoderLM(TinyConfig(200)).to(device)
    before = [p.detach().clone() for p in model.parameters()]
    train(model, [batch], lambda m, b: 1e4 * lm_loss(m, b), torch.optim.SGD(model.parameters(), lr=1.0),
          max_steps=1, clip_norm=0.5, progress=False)
    change = torch.sqrt(sum(((p - q) ** 2).sum() for p, q in zip(model.parameters(), before)))
    assert change.item() == pytest.approx(0.5, rel=1e-3)


def test_bad_arguments_and_bad_losses(one_batch, device):
    _, batch = one_batch
    model = TinyDecoderLM(TinyConfig(200)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with pytest.raises(ValueError, match="give num_epochs, max_steps or time_budget"):
        train(model, [batch], lm_loss, opt)
    with pytest.raises(ValueError, match="max_steps must be a positive int"):
        train(model, [batch], lm_loss, opt, max_steps=0)
    with pytest.raises(TypeError, match="scalar tensor"):
        train(model, [batch], lambda m, b: torch.ones(3), opt, max_steps=1, progress=False)
    with pytest.raises(FloatingPointError, match="loss became nan at step 0"):
        train(model, [batch], lambda m, b: lm_loss(m, b) * float("nan"), opt, max_steps=1,
              progress=False)
    with pytest.raises(ValueError, match="epoch 0 produced no batches"):
        train(model, [], lm_loss, opt, num_epochs=1, progress=False)


def test_history_smoothing_and_extend():
    h = History(steps=[1, 2, 3], losses=[3.0, 1.0, 2.0], tokens=10, seconds=3.0, valid_seconds=1.0)
    assert h.smoothed(2) == [3.0, 2.0, 1.5]
    assert h.train_seconds == 2.0 and h.tokens_per_second == 5.0  # validation time excluded
    h.extend(History(steps=[1, 2], losses=[1.0, 0.5], valid=[{"step": 2, "x": 1}], tokens=4, seconds=1.0))
    assert h.steps == [1, 2, 3, 4, 5] and h.valid == [{"step": 5, "x": 1}] and h.tokens == 14


# ---------------------------------------------------------------- checkpoints

def test_checkpoint_round_trip(tmp_path, device):
    cfg = TinyConfig(50)
    model = TinyDecoderLM(cfg).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randint(4, 50, (2, 7)).to(device)
    model(x).sum().backward()
    opt.step()
    path = save_checkpoint(tmp_path / "ckpt" / "tiny.pt", model, cfg, opt,
                           extra={"itos": ["<pad>", "a"], "bleu": 12.5})
    assert [p.name for p in path.parent.iterdir()] == ["tiny.pt"]  # no temporary file left

    torch.manual_seed(1)
    fresh = TinyDecoderLM(cfg).to(device)
    fresh_opt = torch.optim.Adam(fresh.parameters(), lr=1e-3)
    assert not torch.allclose(fresh(x), model(x))
    extra = load_checkpoint(path, fresh, cfg, fresh_opt)
    torch.testing.assert_close(fresh(x), model(x))
    assert extra == {"itos": ["<pad>", "a"], "bleu": 12.5}
    assert fresh_opt.state_dict()["state"][0]["step"] == opt.state_dict()["state"][0]["step"]
    assert count_parameters(fresh) == count_parameters(model) > 0


def test_half_checkpoint_is_half_the_file_and_loads_into_float32(tmp_path):
    cfg = TinyConfig(50)
    torch.manual_seed(0)
    model = TinyDecoderLM(cfg)
    full = save_checkpoint(tmp_path / "full.pt", model, cfg)
    half = save_checkpoint(tmp_path / "half.pt", model, cfg, extra={"steps": 3}, half=True)
    assert half.stat().st_size < 0.6 * full.stat().st_size
    assert all(v.dtype == torch.float16 for v in torch.load(half, weights_only=True)["model"].values())
    fresh = TinyDecoderLM(cfg)
    assert load_checkpoint(half, fresh, cfg) == {"steps": 3}
    for (name, mine), theirs in zip(fresh.state_dict().items(), model.state_dict().values()):
        assert mine.dtype == torch.float32, name
        torch.testing.assert_close(mine, theirs.half().float(), rtol=0, atol=0)   # exactly the float16 values


def test_predictions_run_in_eval_mode_restore_the_mode_and_come_back_on_the_cpu(device):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.9)).to(device).train()
    x, y = torch.randn(10, 3), torch.arange(10) % 4
    batches = [{"x": x[i:i + 4], "y": y[i:i + 4]} for i in range(0, 10, 4)]       # on the CPU
    modes = []
    predicted, true = predictions(model, batches, lambda m, b: (modes.append(m.training) or m(b["x"]).argmax(-1), b["y"]))
    assert modes == [False] * 3 and model.training                  # eval inside (no dropout), restored after
    assert predicted.device.type == true.device.type == "cpu"
    with torch.no_grad():
        assert predicted.tolist() == model.eval()(x.to(device)).argmax(-1).cpu().tolist() and true.tolist() == y.tolist()
    with pytest.raises(ValueError, match="no batches to predict"):
        predictions(model, [], lambda m, b: (b, b))


def test_load_model_rebuilds_the_model_from_the_config_saved_with_it(tmp_path):
    cfg = TinyConfig(30, hidden=24)
    torch.manual_seed(0)
    model = TinyDecoderLM(cfg)
    path = save_checkpoint(tmp_path / "m.pt", model, cfg, extra={"merges": [[1, 2]]}, half=True)
    seen = []
    loaded, extra = load_model(path, lambda config: seen.append(config) or TinyDecoderLM(TinyConfig(**config)))
    assert seen == [{"vocab_size": 30, "emb": 16, "hidden": 24}] and extra == {"merges": [[1, 2]]}
    for (name, mine), theirs in zip(loaded.state_dict().items(), model.state_dict().values()):
        assert mine.dtype == torch.float32, name
        torch.testing.assert_close(mine, theirs.half().float(), rtol=0, atol=0)
    with pytest.raises(RuntimeError, match="size mismatch"):     # a model that is not the saved one
        load_model(path, lambda config: TinyDecoderLM(TinyConfig(**{**config, "hidden": 8})))
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        load_model(tmp_path / "missing.pt", lambda config: TinyDecoderLM(TinyConfig(**config)))


def test_checkpoint_loads_with_weights_only(tmp_path):
    cfg = TinyConfig(20)
    path = save_checkpoint(tmp_path / "m.pt", TinyDecoderLM(cfg), cfg)
    state = torch.load(path, weights_only=True)  # raises if anything but plain data is inside
    assert state["config"] == {"vocab_size": 20, "emb": 16, "hidden": 32}


def test_checkpoint_with_other_config_is_refused(tmp_path):
    path = save_checkpoint(tmp_path / "m.pt", TinyDecoderLM(TinyConfig(20)), TinyConfig(20))
    other = TinyConfig(20, hidden=64)
    with pytest.raises(CheckpointMismatchError, match=r"hidden: checkpoint has 32, model has 64"):
        load_checkpoint(path, TinyDecoderLM(other), other)
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        load_checkpoint(tmp_path / "missing.pt", TinyDecoderLM(other), other)
    with pytest.raises(TypeError, match="config must be a dataclass instance or a dict, got int"):
        save_checkpoint(tmp_path / "x.pt", TinyDecoderLM(other), 3)


def test_failed_save_leaves_old_checkpoint_intact(tmp_path, monkeypatch):
    cfg = TinyConfig(20)
    path = save_checkpoint(tmp_path / "m.pt", TinyDecoderLM(cfg), cfg)
    before = path.read_bytes()

    def broken_save(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, TinyDecoderLM(cfg), cfg)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["m.pt"]


def test_train_runs_the_steps_it_is_given_in_a_smoke_test_too(one_batch, monkeypatch, device):
    """A smoke test caps the steps in the recipe (recipes.recipe), not in train: a run asked
    for 5 steps or 2 epochs of 4 batches takes them whatever COURSE_SMOKE_STEPS says."""
    data, batch = one_batch
    model = TinyDecoderLM(TinyConfig(max(len(data.src_vocab), len(data.tgt_vocab)))).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    monkeypatch.setenv("COURSE_SMOKE_STEPS", "3")
    assert train(model, [batch] * 4, lm_loss, opt, max_steps=5, progress=False).num_steps == 5
    history = train(model, [batch] * 4, lm_loss, opt, num_epochs=2, progress=False)
    assert history.num_steps == 8 and history.stopped_by == "epochs"


def test_train_refuses_a_model_left_on_the_cpu_beside_a_gpu(one_batch, monkeypatch):
    """The first GPU run trained BERT on the CPU for hours: train() stops at once instead."""
    data, batch = one_batch
    model = TinyDecoderLM(TinyConfig(max(len(data.src_vocab), len(data.tgt_vocab))))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    monkeypatch.delenv("COURSE_DEVICE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(RuntimeError, match=r"train: the model is on the CPU but a CUDA GPU is available.*model\.to\(device\)"):
        train(model, [batch], lm_loss, opt, max_steps=1, progress=False)
    monkeypatch.setenv("COURSE_DEVICE", "cpu")   # asked for the CPU: allowed
    model.cpu()   # (a no-op; under the device check it says the CPU is meant, which the check wants)
    assert train(model, [batch], lm_loss, opt, max_steps=1, progress=False).num_steps == 1


def test_a_config_field_added_later_with_its_default_keeps_old_checkpoints_loadable(tmp_path):
    import dataclasses

    @dataclasses.dataclass
    class Grown(TinyConfig):      # TinyConfig with a field added after the checkpoint was saved
        norm: str | None = None
    path = save_checkpoint(tmp_path / "m.pt", TinyDecoderLM(TinyConfig(20)), TinyConfig(20))
    load_checkpoint(path, TinyDecoderLM(Grown(20)), Grown(20))            # default: loads
    with pytest.raises(CheckpointMismatchError, match=r"norm: checkpoint has None, model has 'batch'"):
        load_checkpoint(path, TinyDecoderLM(Grown(20)), Grown(20, norm="batch"))
