"""GRU encoder-decoders: shapes, padding, the fixed context, attention, teacher forcing."""

import pytest
import torch

from course_utils.seq2seq import Encoder, Seq2Seq, Seq2SeqConfig, seq2seq_loss


def _model(data, **kw):
    torch.manual_seed(0)
    return Seq2Seq(Seq2SeqConfig(len(data.src_vocab), len(data.tgt_vocab), emb_size=8,
                                 hidden_size=12, dropout=0.0, **kw)).eval()


def test_encoder_ignores_padding():
    torch.manual_seed(0)
    enc = Encoder(20, 5, 7, bidirectional=True)
    src = torch.tensor([[5, 6, 7, 0, 0]])
    out_padded, final_padded = enc(src, torch.tensor([3]))
    out_short, final_short = enc(src[:, :3], torch.tensor([3]))
    torch.testing.assert_close(out_padded[:, :3], out_short)
    torch.testing.assert_close(final_padded, final_short)
    assert (out_padded[:, 3:] == 0).all()
    assert out_padded.shape == (1, 5, 14) and final_padded.shape == (1, 14)


def test_one_directional_states_only_know_the_prefix():
    torch.manual_seed(0)
    enc = Encoder(20, 5, 7)
    a, b = torch.tensor([[5, 6, 7, 8, 9]]), torch.tensor([[5, 6, 7, 8, 10]])
    za, _ = enc(a, torch.tensor([5]))
    zb, _ = enc(b, torch.tensor([5]))
    torch.testing.assert_close(za[:, :4], zb[:, :4])  # z_j ignores every later word
    assert not torch.allclose(za[:, 4], zb[:, 4])


@pytest.mark.parametrize("attention", [None, "dot", "multiplicative", "additive", "mlp"])
def test_forward_shapes_and_step_agreement(padded_batch, attention):
    data, b = padded_batch
    model = _model(data, attention=attention, bidirectional=attention is not None)
    logits, weights = model(b.src, b.src_lengths, b.tgt[:, :-1])
    assert logits.shape == (len(b), b.tgt.shape[1] - 1, len(data.tgt_vocab))
    if attention is None:
        assert weights is None
    else:
        assert weights.shape == (len(b), b.tgt.shape[1] - 1, b.src.shape[1])
        mask = torch.arange(b.src.shape[1])[None, None, :] >= b.src_lengths[:, None, None]
        assert (weights.masked_select(mask) == 0).all()
        torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:2]))
    # the step-by-step decoder gives the same log-probabilities as the full forward
    memory, state = model.encode(b.src, b.src_lengths)
    for i in range(3):
        log_probs, state, _ = model.decode_step(b.tgt[:, i], state, memory)
        torch.testing.assert_close(log_probs, torch.log_softmax(logits[:, i], -1))


def test_mean_context_is_the_mean_of_real_states(padded_batch):
    data, b = padded_batch
    model = _model(data, context="mean")
    memory, _ = model.encode(b.src, b.src_lengths)
    outputs, _ = model.encoder(b.src, b.src_lengths)
    for row, n in enumerate(b.src_lengths.tolist()):
        torch.testing.assert_close(memory["context"][row], outputs[row, :n].mean(0))


def test_initial_context_reaches_the_decoder_through_its_first_state_only(padded_batch):
    """Sutskever et al.'s decoder: the source sets s_0 and nothing else; the step-by-step
    path and the all-at-once path agree."""
    data, b = padded_batch
    model = _model(data, context="initial")
    memory, state = model.encode(b.src, b.src_lengths)
    torch.testing.assert_close(state, torch.tanh(model.init_state(memory["context"])))   # s_0 from the last state
    logits, _ = model(b.src, b.src_lengths, b.tgt[:, :-1])
    stepwise, _ = model(b.src, b.src_lengths, b.tgt[:, :-1], teacher_forcing=1 - 1e-9)
    torch.testing.assert_close(stepwise, logits)
    # the same first state with another source: the same outputs (the source is read only via s_0)
    other = {**memory, "context": memory["context"].flip(0)}
    log_probs, _, _ = model.decode_step(b.tgt[:, 0], state, other)
    torch.testing.assert_close(log_probs, torch.log_softmax(logits[:, 0], -1))
    last = _model(data)
    last.load_state_dict(model.state_dict())
    assert not torch.allclose(last(b.src, b.src_lengths, b.tgt[:, :-1])[0], logits)   # 'last' also reads c


def test_teacher_forcing_ratio_changes_the_inputs(padded_batch):
    data, b = padded_batch
    model = _model(data)
    full, _ = model(b.src, b.src_lengths, b.tgt[:, :-1], teacher_forcing=1.0)
    torch.manual_seed(0)
    none, _ = model(b.src, b.src_lengths, b.tgt[:, :-1], teacher_forcing=0.0)
    torch.testing.assert_close(full[:, 0], none[:, 0])  # the first input is always <sos>
    assert not torch.allclose(full[:, 1:], none[:, 1:])
    # a ratio just below 1 takes the step-by-step path yet (almost surely) feeds the
    # reference: it must agree with the all-at-once fast path used for ratio 1
    torch.manual_seed(0)
    stepwise, _ = model(b.src, b.src_lengths, b.tgt[:, :-1], teacher_forcing=1 - 1e-9)
    torch.testing.assert_close(stepwise, full)


def test_loss_ignores_padding_and_starts_near_log_vocab(padded_batch):
    data, b = padded_batch
    model = _model(data, attention="additive", bidirectional=True)
    loss = seq2seq_loss(model, b)
    assert abs(loss.item() - torch.log(torch.tensor(float(len(data.tgt_vocab)))).item()) < 1.0


def test_bad_configs():
    with pytest.raises(ValueError, match="context must be 'last', 'mean' or 'initial', got 'first'"):
        Seq2SeqConfig(10, 10, context="first")
    with pytest.raises(ValueError, match="got 'luong'"):
        Seq2SeqConfig(10, 10, attention="luong")



def test_shipped_english_spanish_model_is_the_recipe_run_and_translates(device):
    """data/es_en_attention.pt (notebook 02's fast profile): checksum-verified, saved with the
    recipe's config and the vocabularies the recipe builds, and it translates held-out verses
    far above the same model untrained."""
    from course_utils import data
    from course_utils.decoding import score_translations
    from course_utils.recipes import ES_EN_FULL as ES_EN
    from course_utils.translation_training import SHIPPED_ES_EN
    from course_utils.training import load_checkpoint
    es = data.es_en_splits(max_len=ES_EN.max_len)
    es_train = data.TranslationData.build(es.train, min_freq=ES_EN.min_freq)
    torch.manual_seed(0)
    model = Seq2Seq(ES_EN.model_config(es_train)).to(device).eval()
    test = es.test[:100]
    untrained = score_translations(model, es_train, test)
    extra = load_checkpoint(data.verified_path(SHIPPED_ES_EN), model, model.cfg)
    assert extra["src_vocab"] == es_train.src_vocab.to_list() and extra["tgt_vocab"] == es_train.tgt_vocab.to_list()
    assert extra["info"]["steps"] == ES_EN.steps
    assert all(p.dtype == torch.float32 for p in model.parameters())     # stored as float16, loaded as float32
    trained = score_translations(model, es_train, test)
    assert trained["bleu"] > 8 and trained["bleu"] > untrained["bleu"] + 7, (trained["bleu"], untrained["bleu"])
