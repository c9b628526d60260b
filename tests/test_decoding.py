"""Greedy, sampling and beam search on a small trained attention model (on the device of
the run: the ``device`` fixture)."""

import copy
import re

import pytest
import torch

from course_utils.data import EOS_ID, TranslationData
from course_utils.decoding import (beam_search, greedy_decode, sample_decode, sequence_log_prob,
                                   translate)
from course_utils.seq2seq import Seq2Seq, Seq2SeqConfig, seq2seq_loss
from course_utils.training import train


@pytest.fixture(scope="module")
def trained(small_synthetic, device):
    """A model that has learned part of the task: it ends its outputs, but makes mistakes
    (so that beams of different sizes have something to disagree about); it and the test
    batch are on the device.

    It is trained on the CPU on every machine, then moved: the tests below hold for these
    weights, and one is not a law of decoding (beam search is not monotone in the beam size:
    this recipe trained on a GPU, an H200, gave one sentence a lower score with beam 2 than
    greedy, with the plain reference beam search and when those weights decoded on the CPU)."""
    data = TranslationData.build(small_synthetic.train)
    torch.manual_seed(0)
    model = Seq2Seq(Seq2SeqConfig(len(data.src_vocab), len(data.tgt_vocab), emb_size=16,
                                  hidden_size=32, bidirectional=True, attention="additive",
                                  attn_size=16, dropout=0.0)).cpu()   # the CPU on purpose (see above)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("COURSE_DEVICE", "cpu")   # asked for: train() refuses a model left on the CPU beside a GPU
        history = train(model, lambda e: data.batches(32, shuffle=True, seed=e), seq2seq_loss, opt,
                        max_steps=250, progress=False)
    assert history.losses[-1] < 0.3 * history.losses[0]  # it learned something
    model.to(device).eval()
    test = data.with_pairs(small_synthetic.test)
    return data, model, test.batches(50, by_length=False)[0].to(device)


def test_beam_of_one_is_greedy(trained):
    _, model, b = trained
    greedy = greedy_decode(model, b.src, b.src_lengths)
    for alpha in (0.0, 1.0):
        beam = beam_search(model, b.src, b.src_lengths, beam_size=1, alpha=alpha)
        assert beam.tokens == greedy.tokens
        assert beam.scores == pytest.approx(greedy.scores, abs=1e-4)


def test_larger_beams_never_lower_the_model_score(trained):
    _, model, b = trained
    previous = None
    for k in (1, 2, 4, 8):
        scores = torch.tensor(beam_search(model, b.src, b.src_lengths, beam_size=k).scores)
        if previous is not None:
            assert (scores >= previous - 1e-4).all(), f"beam {k} scored below a smaller beam"
        previous = scores
    assert (previous > torch.tensor(greedy_decode(model, b.src, b.src_lengths).scores) + 1e-4).any()


def test_reported_scores_are_the_model_log_probabilities(trained):
    _, model, b = trained
    for decoded in (greedy_decode(model, b.src, b.src_lengths),
                    beam_search(model, b.src, b.src_lengths, beam_size=3)):
        rescored = sequence_log_prob(model, b.src, b.src_lengths, decoded.tokens)
        assert rescored == pytest.approx(decoded.scores, abs=1e-4)
        assert all(t[-1] == EOS_ID for t in decoded.tokens)


def test_beam_returns_all_finished_hypotheses_best_first(trained):
    _, model, b = trained
    best, everything = beam_search(model, b.src[:4], b.src_lengths[:4], beam_size=4, return_all=True)
    for tokens, hyps in zip(best.tokens, everything):
        assert hyps[0][0] == tokens
        scores = [s for _, s in hyps]
        assert scores == sorted(scores, reverse=True)


def test_length_normalisation_picks_the_best_normalised_hypothesis(trained):
    _, model, b = trained
    alpha = 1.0
    best, everything = beam_search(model, b.src, b.src_lengths, beam_size=4, alpha=alpha,
                                   return_all=True)
    for tokens, hyps in zip(best.tokens, everything):
        normalised = [s / len(t) ** alpha for t, s in hyps]
        assert tokens == hyps[max(range(len(hyps)), key=normalised.__getitem__)][0]
        raw_best = max(hyps, key=lambda h: h[1])[0]
        assert len(tokens) >= len(raw_best)  # dividing by length favours longer outputs
    # without normalisation (alpha = 0) the winner is the most probable finished hypothesis
    # (whether a longer one ever wins with alpha = 1 depends on the trained weights: not tested)
    raw, everything = beam_search(model, b.src, b.src_lengths, beam_size=4, alpha=0.0, return_all=True)
    for tokens, hyps in zip(raw.tokens, everything):
        assert tokens == max(hyps, key=lambda h: h[1])[0]


def test_low_temperature_sampling_is_greedy_and_high_temperature_varies(trained):
    _, model, b = trained
    greedy = greedy_decode(model, b.src, b.src_lengths)
    cold = sample_decode(model, b.src, b.src_lengths, temperature=1e-3,
                         generator=torch.Generator().manual_seed(0))
    assert cold.tokens == greedy.tokens
    hot = [sample_decode(model, b.src, b.src_lengths, temperature=2.0,
                         generator=torch.Generator().manual_seed(s)).tokens for s in (1, 2)]
    assert hot[0] != hot[1] and hot[0] != greedy.tokens
    again = sample_decode(model, b.src, b.src_lengths, temperature=2.0,
                          generator=torch.Generator().manual_seed(1)).tokens
    assert again == hot[0]  # seeded: repeatable


def test_attention_weights_cover_real_source_positions(trained):
    _, model, b = trained
    out = greedy_decode(model, b.src, b.src_lengths)
    for w, n, toks in zip(out.weights, b.src_lengths.tolist(), out.tokens):
        assert w.shape == (len(toks), n)
        torch.testing.assert_close(w.sum(-1).cpu(), torch.ones(len(toks)))


def test_translate_keeps_input_order(trained, small_synthetic):
    data, model, _ = trained
    pairs = small_synthetic.test[:20]
    out = translate(model, data, pairs, batch_size=7)
    singles = [translate(model, data, [p])[0] for p in pairs[:5]]
    assert out[:5] == singles
    assert translate(model, data, [s for s, _ in pairs[:5]]) == singles
    with pytest.raises(ValueError, match="method must be one of"):
        translate(model, data, pairs, method="viterbi")


def test_bad_inputs(trained):
    _, model, b = trained
    with pytest.raises(ValueError, match="beam_size must be a positive int, got 0"):
        beam_search(model, b.src, b.src_lengths, beam_size=0)
    with pytest.raises(ValueError, match="temperature must be positive"):
        sample_decode(model, b.src, b.src_lengths, temperature=0)
    with pytest.raises(ValueError, match=r"src must have shape \(batch, src_len\)"):
        greedy_decode(model, b.src[0], b.src_lengths)


def test_score_translations_matches_translate_and_the_metrics(trained, small_synthetic):
    from course_utils.decoding import score_translations
    from course_utils.metrics import bleu, exact_match, scores_by_length
    data, model, _ = trained
    pairs = small_synthetic.test[:40]
    scored = score_translations(model, data, pairs, batch_size=16)
    hyps = translate(model, data, pairs)
    refs = [t.split() for _, t in pairs]
    assert scored["hypotheses"] == hyps
    assert scored["bleu"] == pytest.approx(bleu(hyps, refs))
    assert scored["exact_match"] == pytest.approx(exact_match(hyps, refs))
    assert scored["by_length"] == scores_by_length([len(s.split()) for s, _ in pairs], hyps, refs)


def test_a_model_and_its_input_on_different_devices_fail_clearly(trained):
    _, model, b = trained
    here = re.escape(str(next(model.parameters()).device))   # cpu, or cuda:0 on a GPU (and under the check)
    with pytest.raises(RuntimeError, match=rf"the model is on {here} but its input \(50, \d+\) is on meta"):
        greedy_decode(model, b.src.to("meta"), b.src_lengths)
    with pytest.raises(RuntimeError, match="move the input"):
        beam_search(model, b.src.to("meta"), b.src_lengths, beam_size=2)
    # the lengths may stay on the CPU (pack_padded_sequence wants them there): the decoders
    # move them to the source's device themselves (the first GPU run failed on this in 01)


def test_decoding_refuses_a_model_left_on_the_cpu_beside_a_gpu(trained, monkeypatch):
    _, model, b = trained
    on_cpu = copy.deepcopy(model).cpu()   # the trained model is on the device of the run
    monkeypatch.delenv("COURSE_DEVICE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(RuntimeError, match=r"decoding: the model is on the CPU but a CUDA GPU is available.*model\.to\(device\)"):
        greedy_decode(on_cpu, b.src.cpu(), b.src_lengths.cpu())


def test_a_smoke_test_caps_the_output_length_and_nothing_else_does(small_synthetic, monkeypatch, device):
    from course_utils.runtime import SMOKE_DECODE_LEN
    data = TranslationData.build(small_synthetic.train)
    torch.manual_seed(0)
    untrained = Seq2Seq(Seq2SeqConfig(len(data.src_vocab), len(data.tgt_vocab), emb_size=8,
                                      hidden_size=8, attention="additive", attn_size=8)).to(device).eval()
    b = data.with_pairs(small_synthetic.test).batches(8, by_length=False)[0].to(device)
    max_len = SMOKE_DECODE_LEN + 8

    def longest():
        return (max(map(len, greedy_decode(untrained, b.src, b.src_lengths, max_len=max_len).tokens)),
                max(map(len, beam_search(untrained, b.src, b.src_lengths, beam_size=2, max_len=max_len).tokens)))
    monkeypatch.delenv("COURSE_SMOKE_STEPS", raising=False)
    normal = longest()
    assert max(normal) > SMOKE_DECODE_LEN        # an untrained model writes on past the cap
    monkeypatch.setenv("COURSE_SMOKE_STEPS", "2")
    assert max(longest()) <= SMOKE_DECODE_LEN
