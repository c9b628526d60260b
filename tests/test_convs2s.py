"""ConvS2S: GLU, causal convolutions, receptive field, padding, attention, positions,
agreement of the step-by-step decoder with the parallel forward, bad inputs."""

import pytest
import torch
from torch import nn

from course_utils.decoding import beam_search, greedy_decode
from course_utils.convs2s import ConvS2S, ConvS2SConfig, IncrementalConvS2S, causal_conv1d, glu, receptive_field
from course_utils.seq2seq import seq2seq_loss


def _model(data, **kw):
    torch.manual_seed(0)
    cfg = dict(emb_size=8, hidden_size=12, encoder_layers=2, decoder_layers=2)
    cfg.update(kw)
    return ConvS2S(ConvS2SConfig(len(data.src_vocab), len(data.tgt_vocab), **cfg)).eval()


def test_glu_matches_torch_and_a_known_answer():
    x = torch.randn(2, 6, 5)
    torch.testing.assert_close(glu(x, dim=1), nn.functional.glu(x, dim=1))
    out = glu(torch.tensor([2.0, 0.0]), dim=0)  # 2 * sigmoid(0) = 1
    torch.testing.assert_close(out, torch.tensor([1.0]))
    with pytest.raises(ValueError, match="even size along dim 1, got shape"):
        glu(torch.randn(2, 5, 3), dim=1)


@pytest.mark.parametrize("layers,kernel,expected", [(1, 3, 3), (3, 3, 7), (4, 5, 17), (0, 3, 1)])
def test_receptive_field_known_answers(layers, kernel, expected):
    assert receptive_field(layers, kernel) == expected


def test_receptive_field_by_gradients():
    torch.manual_seed(0)
    convs = [nn.Conv1d(2, 2, 3) for _ in range(3)]
    x = torch.randn(1, 2, 20, requires_grad=True)
    y = x
    for conv in convs:
        y = causal_conv1d(y, conv)
    y[0, :, 12].sum().backward()
    seen = (x.grad[0].abs().sum(0) > 0).nonzero().flatten().tolist()
    assert seen == list(range(12 - receptive_field(3, 3) + 1, 13))  # 6..12: 7 inputs, none after 12


def test_causal_conv_never_sees_the_future():
    torch.manual_seed(0)
    conv = nn.Conv1d(3, 4, 5)
    x = torch.randn(2, 3, 9, requires_grad=True)
    y = causal_conv1d(x, conv)
    assert y.shape == (2, 4, 9)
    for i in range(9):
        (grad,) = torch.autograd.grad(y[:, :, i].sum(), x, retain_graph=True)
        assert (grad[:, :, i + 1:] == 0).all()
        assert (grad[:, :, i].abs() > 0).any()
    with pytest.raises(ValueError, match="batch, channels, time"):
        causal_conv1d(torch.randn(3, 9), conv)


def test_decoder_output_i_depends_only_on_inputs_up_to_i(padded_batch):
    data, b = padded_batch
    model = _model(data)
    memory, _ = model.encode(b.src, b.src_lengths)
    tgt = b.tgt[:, :-1]
    logits, _ = model.run_decoder(tgt, memory)
    changed = tgt.clone()
    changed[:, 4] = (changed[:, 4] + 1) % len(data.tgt_vocab)
    other, _ = model.run_decoder(changed, memory)
    torch.testing.assert_close(logits[:, :4], other[:, :4])
    assert not torch.allclose(logits[:, 4], other[:, 4])


def test_encoder_ignores_padding(padded_batch):
    data, b = padded_batch
    model = _model(data)
    z, ze, mask = model.run_encoder(b.src, b.src_lengths)
    for row, n in enumerate(b.src_lengths.tolist()):
        alone, alone_ze, _ = model.run_encoder(b.src[row:row + 1, :n], b.src_lengths[row:row + 1])
        torch.testing.assert_close(z[row, :n], alone[0])
        torch.testing.assert_close(ze[row, :n], alone_ze[0])
        assert (z[row, n:] == 0).all() and (ze[row, n:] == 0).all()
        assert mask[row].sum() == n


def test_attention_weights_mask_padding_and_sum_to_one(padded_batch):
    data, b = padded_batch
    model = _model(data, decoder_layers=3)
    logits, weights = model(b.src, b.src_lengths, b.tgt[:, :-1])
    T, S = b.tgt.shape[1] - 1, b.src.shape[1]
    assert logits.shape == (len(b), T, len(data.tgt_vocab))
    assert weights.shape == (len(b), 3, T, S)
    pad = torch.arange(S)[None, None, None, :] >= b.src_lengths[:, None, None, None]
    assert (weights.masked_select(pad) == 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(len(b), 3, T))


def test_attention_output_is_weighted_sum_of_z_plus_e(padded_batch):
    data, b = padded_batch
    model = _model(data)
    z, ze, _ = model.run_encoder(b.src, b.src_lengths)
    e = model.src_embedding(b.src) + model.src_position(torch.arange(b.src.shape[1]))
    mask = b.src != 0
    torch.testing.assert_close(ze, (z + e) * mask.unsqueeze(-1))


def test_decode_step_agrees_with_parallel_forward(padded_batch):
    data, b = padded_batch
    model = _model(data)
    logits, weights = model(b.src, b.src_lengths, b.tgt[:, :-1])
    memory, state = model.encode(b.src, b.src_lengths)
    assert b.tgt.shape[1] - 1 > receptive_field(2, 3)  # the step crops the prefix to 5 words
    for i in range(b.tgt.shape[1] - 1):
        log_probs, state, w = model.decode_step(b.tgt[:, i], state, memory)
        assert state.shape == (len(b), i + 1)
        torch.testing.assert_close(log_probs, torch.log_softmax(logits[:, i], -1))
        torch.testing.assert_close(w, weights[:, -1, i])


@pytest.mark.parametrize("layers,kernel", [(2, 3), (3, 5), (1, 1)])
def test_the_incremental_decoder_agrees_with_the_parallel_forward(padded_batch, layers, kernel):
    # fairseq's way (one new position per layer and word, the last k - 1 inputs kept) gives the
    # teacher-forced forward's distributions and attention at every position, past the window
    data, b = padded_batch
    model = _model(data, decoder_layers=layers, kernel_size=kernel)
    logits, weights = model(b.src, b.src_lengths, b.tgt[:, :-1])
    fast = IncrementalConvS2S(model)
    memory, state = fast.encode(b.src, b.src_lengths)
    assert b.tgt.shape[1] - 1 > receptive_field(layers, kernel)
    for i in range(b.tgt.shape[1] - 1):
        log_probs, state, w = fast.decode_step(b.tgt[:, i], state, memory)
        assert state["position"] == i + 1 and all(t.shape == (len(b), model.cfg.hidden_size, kernel - 1)
                                                  for t in state["buffers"])
        torch.testing.assert_close(log_probs, torch.log_softmax(logits[:, i], -1))
        torch.testing.assert_close(w, weights[:, -1, i])


def test_the_incremental_decoder_decodes_as_the_windowed_one(padded_batch, device):
    data, b = padded_batch
    model, b = _model(data).to(device), b.to(device)
    fast = IncrementalConvS2S(model)
    for decode in (lambda m: greedy_decode(m, b.src, b.src_lengths, max_len=9),
                   lambda m: beam_search(m, b.src, b.src_lengths, beam_size=3, max_len=9)):
        slow_out, fast_out = decode(model), decode(fast)
        assert fast_out.tokens == slow_out.tokens
        torch.testing.assert_close(torch.tensor(fast_out.scores), torch.tensor(slow_out.scores))
    with pytest.raises(TypeError, match="wraps a ConvS2S, got Linear"):
        IncrementalConvS2S(nn.Linear(2, 2))
    memory, state = fast.encode(b.src, b.src_lengths)
    with pytest.raises(ValueError, match="longer than max_positions"):
        fast.decode_step(b.tgt[:, 0], {**state, "position": model.cfg.max_positions}, memory)


def test_works_with_the_shared_decoders(padded_batch, device):
    data, b = padded_batch
    model, b = _model(data).to(device), b.to(device)
    greedy = greedy_decode(model, b.src, b.src_lengths, max_len=6)
    beam = beam_search(model, b.src, b.src_lengths, beam_size=1, max_len=6)
    assert greedy.tokens == beam.tokens
    assert all(w.shape == (len(t), int(n)) for w, t, n in zip(greedy.weights, greedy.tokens, b.src_lengths))
    wide = beam_search(model, b.src, b.src_lengths, beam_size=3, max_len=6)
    assert len(wide.tokens) == len(b)


def test_without_positions_a_width_one_encoder_is_permutation_equivariant():
    torch.manual_seed(0)
    model = ConvS2S(ConvS2SConfig(30, 30, emb_size=8, hidden_size=8, kernel_size=1, positions=False)).eval()
    src = torch.tensor([[5, 9, 7, 12, 3]])
    perm = torch.tensor([3, 0, 4, 1, 2])
    z, ze, _ = model.run_encoder(src, torch.tensor([5]))
    zp, zep, _ = model.run_encoder(src[:, perm], torch.tensor([5]))
    torch.testing.assert_close(zp, z[:, perm])
    # so every attention output, a weighted sum over the source, cannot see word order
    tgt = torch.tensor([[1, 6, 8]])
    a, _ = model(src, torch.tensor([5]), tgt)
    bb, _ = model(src[:, perm], torch.tensor([5]), tgt)
    torch.testing.assert_close(a, bb)
    with_pos = ConvS2S(ConvS2SConfig(30, 30, emb_size=8, hidden_size=8, kernel_size=1)).eval()
    a, _ = with_pos(src, torch.tensor([5]), tgt)
    bb, _ = with_pos(src[:, perm], torch.tensor([5]), tgt)
    assert not torch.allclose(a, bb)


def test_loss_starts_near_log_vocab_and_training_step_lowers_it(padded_batch, device):
    data, b = padded_batch
    model, b = _model(data).to(device).train(), b.to(device)
    loss = seq2seq_loss(model, b)
    assert abs(loss.item() - torch.log(torch.tensor(float(len(data.tgt_vocab)))).item()) < 1.0
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(5):
        opt.zero_grad()
        seq2seq_loss(model, b).backward()
        opt.step()
    assert seq2seq_loss(model, b).item() < loss.item()


def test_bad_inputs(padded_batch):
    data, b = padded_batch
    with pytest.raises(ValueError, match="kernel_size must be a positive odd int, got 4"):
        ConvS2SConfig(10, 10, kernel_size=4)
    with pytest.raises(ValueError, match="encoder_layers must be a positive int, got 0"):
        ConvS2SConfig(10, 10, encoder_layers=0)
    with pytest.raises(ValueError, match="num_layers must be a non-negative int"):
        receptive_field(-1, 3)
    model = _model(data, max_positions=4)
    with pytest.raises(ValueError, match="longer than max_positions=4"):
        model.encode(b.src, b.src_lengths)
    model = _model(data)
    with pytest.raises(ValueError, match="teacher forcing 1.0 only, got 0.5"):
        model(b.src, b.src_lengths, b.tgt[:, :-1], teacher_forcing=0.5)
    with pytest.raises(ValueError, match=r"src must have shape \(batch, src_len\)"):
        model.encode(b.src[0], b.src_lengths)


def test_embeddings_are_drawn_with_the_configured_spread(padded_batch):
    data, _ = padded_batch
    small = _model(data, emb_size=64, emb_std=0.1).src_embedding.weight[1:]   # row 0: <pad>, zero
    large = _model(data, emb_size=64, emb_std=1.0).src_embedding.weight[1:]
    assert abs(small.std().item() - 0.1) < 0.02 and abs(large.std().item() - 1.0) < 0.2
    assert (_model(data).src_embedding.weight[0] == 0).all()
    with pytest.raises(ValueError, match="emb_std must be a positive number, got 0"):
        ConvS2SConfig(10, 10, emb_std=0)


def test_recipe_schedule_warms_up_then_decays_to_its_floor():
    from course_utils.recipes import ConvS2STraining
    r = ConvS2STraining(lr=1e-3, warmup=10, final_lr=0.05, steps=100)
    assert r.lr_factor(0) == pytest.approx(0.1 * 1.0) and r.lr_factor(9) == pytest.approx(1.0 - 9 / 100)
    factors = [r.lr_factor(s) for s in range(100)]
    peak = factors.index(max(factors))
    assert peak == 9 and all(a >= b for a, b in zip(factors[peak:], factors[peak + 1:]))   # then only down
    assert min(factors) == pytest.approx(0.05)                                             # the floor
    constant = ConvS2STraining(warmup=0, final_lr=1.0, steps=100)
    assert {constant.lr_factor(s) for s in range(100)} == {1.0}
    cfg = r.model_config(11, 13, kernel_size=5)
    assert (cfg.src_vocab_size, cfg.tgt_vocab_size, cfg.kernel_size, cfg.emb_std) == (11, 13, 5, r.emb_std)
