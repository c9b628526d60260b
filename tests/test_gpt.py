"""course_utils.gpt: the decoder-only model, its cache, the samplers, the baselines,
fine-tuning for classification and the shipped checkpoint."""

import math

import pytest
import torch

from course_utils import gpt, gpt_training, recipes
from course_utils.bpe import BPETokenizer


def tiny(vocab=40, max_len=12, layers=2, seed=0):
    torch.manual_seed(seed)
    return gpt.GPT(gpt.GPTConfig(vocab, max_len, d_model=32, num_heads=4, num_layers=layers, d_ff=64)).eval()


def test_no_logit_depends_on_a_later_token():
    model = tiny()
    idx = torch.randint(40, (1, 10))
    embedded = model.tok_emb(idx).detach().requires_grad_(True)
    # run the model from embeddings so that the gradient reaches every input position
    positions = model.pos_emb(torch.arange(10))
    x = embedded + positions
    mask = gpt.causal_mask(10)
    for block in model.blocks:
        x, _ = block(x, mask)
    logits = model.logits(model.norm(x))
    for t in range(10):
        grad, = torch.autograd.grad(logits[0, t].sum(), embedded, retain_graph=True)
        reach = grad[0].abs().sum(-1) > 0
        assert not reach[t + 1:].any(), f"logit {t} depends on a later token"
        assert reach[:t + 1].all(), f"logit {t} ignores an earlier token"


def test_changing_a_later_token_leaves_earlier_logits_unchanged():
    model = tiny()
    idx = torch.randint(40, (2, 12))
    changed = idx.clone()
    changed[:, 7] = (changed[:, 7] + 1) % 40
    a, b = model(idx), model(changed)
    torch.testing.assert_close(a[:, :7], b[:, :7])
    assert not torch.allclose(a[:, 7:], b[:, 7:])


def test_forward_shape_and_tied_output_layer():
    model = tiny()
    logits = model(torch.randint(40, (3, 5)))
    assert logits.shape == (3, 5, 40)
    assert all(p is not model.tok_emb.weight for n, p in model.named_parameters() if "head" in n)
    states, weights = model.hidden(torch.randint(40, (3, 5)), need_weights=True)
    assert states.shape == (3, 5, 32) and len(weights) == 2
    assert weights[0].shape == (3, 4, 5, 5)
    torch.testing.assert_close(weights[1].sum(-1), torch.ones(3, 4, 5))
    assert weights[0].triu(1).abs().max() == 0   # nothing above the diagonal: no look-ahead


@pytest.mark.parametrize("which", ["tiny", "shipped"])
def test_cached_step_matches_the_full_forward(which):
    """The prompt, then one token at a time, then three at once: every step's logits are those
    of the whole sequence read again (the shipped GPT too, whose cache is what 07 times)."""
    model = tiny() if which == "tiny" else gpt_training.load_pretrained()[0].eval()
    vocab, heads = model.config.vocab_size, model.config.num_heads
    idx = torch.randint(vocab, (2, 12), generator=torch.Generator().manual_seed(0))
    logits, cache = model.step(idx[:, :4])
    torch.testing.assert_close(logits, model(idx[:, :4])[:, -1], rtol=1e-5, atol=1e-5)
    for t in range(4, 9):
        logits, cache = model.step(idx[:, t:t + 1], cache)
        torch.testing.assert_close(logits, model(idx[:, :t + 1])[:, -1], rtol=1e-5, atol=1e-5)
    logits, cache = model.step(idx[:, 9:12], cache)   # several new positions after a cache
    torch.testing.assert_close(logits, model(idx)[:, -1], rtol=1e-5, atol=1e-5)
    assert cache[0][0].shape == (2, heads, 12, model.config.d_model // heads)   # (batch, heads, positions, d_head)


@pytest.mark.parametrize("norm_first", [True, False])
def test_a_layer_reading_its_cache_is_the_layer_on_the_whole_sequence(norm_first):
    """Generation runs the model's own layer (EncoderLayer.forward) on the new positions with a
    KVCache: its outputs are those of the layer on the whole sequence under the causal mask,
    and the cache holds the keys and values of every position read."""
    from course_utils.attention import KVCache
    from course_utils.transformer import EncoderLayer
    torch.manual_seed(0)
    layer = EncoderLayer(16, 4, 32, norm_first=norm_first).eval()
    x = torch.randn(2, 7, 16)
    whole, _ = layer(x, gpt.causal_mask(7))
    cache = KVCache()
    first, _ = layer(x[:, :3], gpt.causal_mask(3), cache=cache)
    rows = [layer(x[:, t:t + 1], None, need_weights=False, cache=cache)[0] for t in range(3, 5)]
    last, weights = layer(x[:, 5:], gpt.causal_mask(7)[5:], cache=cache)   # two new rows of the mask
    torch.testing.assert_close(torch.cat([first, *rows, last], dim=1), whole, rtol=1e-5, atol=1e-5)
    assert len(cache) == 7 and cache.keys.shape == cache.values.shape == (2, 4, 7, 4)
    assert weights.shape == (2, 4, 2, 7) and weights[..., 0, 6].abs().max() == 0   # position 5 does not read 6
    with pytest.raises(ValueError, match="n_k"):   # the mask must have a column for each cached key too
        layer(x[:, :1], gpt.causal_mask(1), cache=cache)


@pytest.mark.parametrize("prompt_len, new", [(3, 6), (5, 20)])  # the second runs past max_len = 12
def test_greedy_is_the_same_with_and_without_the_cache(prompt_len, new, device):
    model = tiny().to(device)
    idx = torch.randint(40, (3, prompt_len)).to(device)
    cached = gpt.generate(model, idx, new, temperature=0, use_cache=True)
    uncached = gpt.generate(model, idx, new, temperature=0, use_cache=False)
    assert cached.shape == (3, prompt_len + new)
    assert torch.equal(cached, uncached)
    assert torch.equal(cached[:, :prompt_len], idx)


def test_greedy_picks_the_argmax_of_the_cropped_context(device):
    model = tiny().to(device)
    idx = torch.randint(40, (1, 15)).to(device)   # longer than max_len = 12: cropped to the last 12
    out = gpt.generate(model, idx, 1, temperature=0)
    assert out[0, -1] == model(idx[:, -12:])[0, -1].argmax()


def test_top_k_one_and_tiny_top_p_are_greedy(device):
    model = tiny().to(device)
    idx = torch.randint(40, (2, 4)).to(device)
    greedy = gpt.generate(model, idx, 8, temperature=0)
    g = torch.Generator(device=device).manual_seed(0)   # on the model's device (generate's docstring)
    assert torch.equal(gpt.generate(model, idx, 8, temperature=1.5, top_k=1, generator=g), greedy)
    assert torch.equal(gpt.generate(model, idx, 8, temperature=1.5, top_p=1e-6, generator=g), greedy)


def test_top_p_one_is_plain_sampling_and_a_generator_makes_it_reproducible(device):
    model = tiny().to(device)
    idx = torch.randint(40, (2, 4)).to(device)
    runs = [gpt.generate(model, idx, 10, top_p=p, generator=torch.Generator(device=device).manual_seed(7))
            for p in (None, 1.0, None)]
    assert torch.equal(runs[0], runs[1]) and torch.equal(runs[0], runs[2])
    other = gpt.generate(model, idx, 10, generator=torch.Generator(device=device).manual_seed(8))
    assert not torch.equal(runs[0], other)


def test_filter_logits_known_values():
    logits = torch.tensor([[0.5, 0.3, 0.15, 0.05]]).log()
    kept = lambda out: torch.isfinite(out[0]).tolist()  # noqa: E731
    assert kept(gpt.filter_logits(logits, top_k=2)) == [True, True, False, False]
    # the tokens ranked above the third hold 0.8: p = 0.8 stops before it, p = 0.81 keeps it
    assert kept(gpt.filter_logits(logits, top_p=0.8)) == [True, True, False, False]
    assert kept(gpt.filter_logits(logits, top_p=0.81)) == [True, True, True, False]
    assert kept(gpt.filter_logits(logits, top_p=0.3)) == [True, False, False, False]
    shuffled = logits[:, [2, 0, 3, 1]]   # the nucleus follows the tokens, not their positions
    assert kept(gpt.filter_logits(shuffled, top_p=0.81)) == [True, True, False, True]


def test_one_sampling_step_follows_the_softmax_in_bulk():
    torch.manual_seed(0)
    logits = torch.randn(1, 6) * 1.5
    g = torch.Generator().manual_seed(1)
    n = 40_000
    draws = gpt.next_token(logits.expand(n, 6), temperature=0.7, generator=g).squeeze(1)
    freq = torch.bincount(draws, minlength=6).double() / n
    expected = (logits[0].double() / 0.7).softmax(-1)
    # four standard errors of a binomial share
    assert ((freq - expected).abs() <= 4 * (expected * (1 - expected) / n).sqrt() + 1e-9).all(), (freq, expected)
    # top-k 3: the same shares renormalised over the three largest, zero elsewhere
    draws = gpt.next_token(logits.expand(n, 6), temperature=1.0, top_k=3, generator=g).squeeze(1)
    freq = torch.bincount(draws, minlength=6).double() / n
    top = logits[0].topk(3).indices
    expected = torch.zeros(6, dtype=torch.double)
    expected[top] = logits[0, top].double().softmax(-1)
    assert ((freq - expected).abs() <= 4 * (expected * (1 - expected) / n).sqrt() + 1e-9).all(), (freq, expected)


def test_loss_falls_on_a_memorisable_batch(device):
    model = tiny().to(device).train()
    windows = torch.randint(40, (4, 13)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    first = gpt.lm_loss(model, windows).item()
    assert abs(first - math.log(40)) < 0.3    # a fresh model guesses about uniformly
    for _ in range(150):
        loss = gpt.lm_loss(model, windows)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.2 * first


def test_fit_lowers_the_heldout_loss_below_the_bigram_baseline(device):
    # a stream with a rule the bigram cannot see: every token repeats the one two back
    g = torch.Generator().manual_seed(0)
    pairs = torch.randint(10, (3000, 2), generator=g)
    tokens = torch.cat([pairs, pairs], dim=1).reshape(-1)   # a b a b c d c d ...
    train, test = tokens[:9000], tokens[9000:]
    model = tiny(vocab=10, max_len=12).to(device).train()
    recipe = recipes.GPTTraining(num_merges=0, max_len=12, d_model=32, num_heads=4, num_layers=2, d_ff=64,
                             dropout=0.0, batch_size=32, steps=250, lr=3e-3, warmup=20)
    gpt_training.fit(model, train, recipe)
    windows = gpt_training.heldout_windows(test, 12)
    bigram = gpt_training.ngram_loss(train, windows, 10, order=2)
    assert gpt_training.heldout_loss(model, windows) < bigram - 0.3


def test_ngram_losses_known_values():
    train = torch.tensor([0, 1, 0, 1, 0, 2])
    windows = torch.tensor([[0, 1, 0]])
    # unigram counts (3, 2, 1) + 0.5 each over 3 tokens: p(1) = 2.5/7.5, p(0) = 3.5/7.5
    uni = gpt_training.ngram_loss(train, windows, 3, order=1, alpha=0.5)
    assert uni == pytest.approx(-(math.log(2.5 / 7.5) + math.log(3.5 / 7.5)) / 2)
    # bigram: after 0 came 1, 1, 2; after 1 came 0, 0 (alpha 0.5 on 3 successors)
    bi = gpt_training.ngram_loss(train, windows, 3, order=2, alpha=0.5)
    assert bi == pytest.approx(-(math.log(2.5 / 4.5) + math.log(2.5 / 3.5)) / 2)
    with pytest.raises(ValueError, match="order must be 1"):
        gpt_training.ngram_loss(train, windows, 3, order=3)


def test_windows_are_shifted_copies_of_the_stream():
    tokens = torch.arange(100)
    w = gpt_training.random_windows(tokens, 8, 5, torch.Generator().manual_seed(0))
    assert w.shape == (5, 9)
    assert torch.equal(w[:, 1:] - w[:, :-1], torch.ones(5, 8, dtype=torch.long))
    held = gpt_training.heldout_windows(tokens, 8)
    assert held.shape == (12, 9) and held[1, 0] == 8 and held[0, -1] == 8
    with pytest.raises(ValueError, match="at least max_len \\+ 1 = 9"):
        gpt_training.random_windows(torch.arange(5), 8, 2)


def test_classifier_reads_the_last_real_token_and_ignores_padding_after_it():
    model = gpt.GPTClassifier(tiny(), 3).eval()
    ids = torch.randint(1, 40, (2, 12))
    lengths = torch.tensor([5, 12])
    logits, token_logits = model(ids, lengths)
    assert logits.shape == (2, 3) and token_logits.shape == (2, 12, 40)
    padded = ids.clone()
    padded[0, 5:] = 0
    torch.testing.assert_close(model(padded, lengths)[0], logits)
    alone = model(ids[:1, :5], lengths[:1])[0]
    torch.testing.assert_close(alone, logits[:1], rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="lengths must be in 1..12"):
        model(ids, torch.tensor([0, 3]))


def test_classification_loss_with_the_auxiliary_lm_term():
    model = gpt.GPTClassifier(tiny(), 3).eval()
    batch = {"input_ids": torch.randint(1, 40, (2, 12)), "lengths": torch.tensor([5, 12]),
             "labels": torch.tensor([0, 2])}
    plain = gpt.classification_loss(model, batch)
    both = gpt.classification_loss(model, batch, lm_weight=0.5)
    _, token_logits = model(batch["input_ids"], batch["lengths"])
    lm = torch.cat([torch.nn.functional.cross_entropy(token_logits[0, :4], batch["input_ids"][0, 1:5], reduction="none"),
                    torch.nn.functional.cross_entropy(token_logits[1, :11], batch["input_ids"][1, 1:], reduction="none")]).mean()
    torch.testing.assert_close(both, plain + 0.5 * lm)


def test_encode_for_classification_truncates_and_pads():
    tok = BPETokenizer([("a", "b")], byte_level=True)
    enc = gpt_training.encode_for_classification(tok, ["ab ab ab", "b"], [1, 0], max_len=3)
    assert enc["lengths"].tolist() == [3, 1]
    assert enc["input_ids"][1, 1:].tolist() == [0, 0]
    with pytest.raises(ValueError, match="as many"):
        gpt_training.encode_for_classification(tok, ["a"], [1, 0], max_len=3)


def test_checkpoint_round_trip(tmp_path):
    tok = BPETokenizer([("t", "h"), ("th", "e")], byte_level=True)
    model = tiny(vocab=len(tok))
    path = tmp_path / "m.pt"
    gpt_training.save_pretrained(path, model, tok, {"steps": 3})
    loaded, tok2, info = gpt_training.load_pretrained(path)
    assert info == {"steps": 3} and tok2.merges == tok.merges and loaded.config == model.config
    idx = torch.tensor([tok.encode("the theme")])
    torch.testing.assert_close(loaded(idx), model(idx), rtol=1e-2, atol=1e-2)   # float16 storage


def test_shipped_checkpoint_loads_verified_and_beats_the_bigram(device):
    from course_utils.novels import split_paragraphs
    from course_utils.data import load_english_text
    model, tok, info = gpt_training.load_pretrained(device=device)   # evaluated on the device of the run
    assert len(tok) == model.config.vocab_size == 256 + len(tok.merges)
    assert info["heldout_loss"] < 4.5
    _, test = split_paragraphs(load_english_text())
    tokens = gpt_training.encode_text(tok, gpt_training.novel_text(test[:400]))
    windows = gpt_training.heldout_windows(tokens, model.config.max_len, 40)
    train = gpt_training.encode_text(tok, gpt_training.novel_text(test[400:]))   # any Austen text for the counts
    assert gpt_training.heldout_loss(model, windows) < gpt_training.ngram_loss(train, windows, len(tok), order=2) - 0.5


def test_bad_inputs_say_what_was_expected(device):
    model = tiny().to(device)
    with pytest.raises(ValueError, match="reads at most max_len = 12"):
        model(torch.zeros(1, 13, dtype=torch.long, device=device))
    if device.type == "cpu":   # ids are read on the CPU only (on a GPU that would wait for it)
        with pytest.raises(ValueError, match="token id 40 is outside the vocabulary 0..39"):
            model(torch.tensor([[1, 40]], device=device))
        with pytest.raises(ValueError, match="token id -1"):
            gpt.generate(model, torch.tensor([[-1]], device=device), 2)
    with pytest.raises(TypeError, match=r"idx \(token ids\) must have an integer dtype"):
        model(torch.zeros(1, 3, device=device))
    with pytest.raises(ValueError, match=r"\(batch, t\), got \(3,\)"):
        model(torch.zeros(3, dtype=torch.long, device=device))
    with pytest.raises(ValueError, match="temperature must be a number >= 0"):
        gpt.generate(model, torch.zeros(1, 2, dtype=torch.long, device=device), 2, temperature=-1)
    with pytest.raises(ValueError, match="top_k must be a positive int"):
        gpt.generate(model, torch.zeros(1, 2, dtype=torch.long, device=device), 2, top_k=0)
    with pytest.raises(ValueError, match=r"top_p must be a number in \(0, 1\]"):
        gpt.generate(model, torch.zeros(1, 2, dtype=torch.long, device=device), 2, top_p=1.5)
    with pytest.raises(ValueError, match="max_new_tokens must be an int >= 0"):
        gpt.generate(model, torch.zeros(1, 2, dtype=torch.long, device=device), -1)
    with pytest.raises(ValueError, match="divisible"):
        gpt.GPTConfig(10, d_model=30, num_heads=4)
    with pytest.raises(ValueError, match="GPTConfig.max_len must be a positive int"):
        gpt.GPTConfig(10, max_len=0)
    with pytest.raises(TypeError, match="needs a GPTConfig"):
        gpt.GPT({"vocab_size": 10})


def test_generate_stops_a_model_left_on_the_cpu_beside_a_gpu(monkeypatch):
    model = tiny()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.delenv("COURSE_DEVICE", raising=False)
    with pytest.raises(RuntimeError, match=r"model.to\(device\)"):
        gpt.generate(model, torch.zeros(1, 2, dtype=torch.long), 2)


def test_recipes_and_smoke_caps(monkeypatch):
    assert recipes.recipe("gpt", "fast") is recipes.GPT_FAST and recipes.recipe("gpt", "full") is recipes.GPT_FULL
    monkeypatch.setenv("COURSE_SMOKE_STEPS", "2")
    monkeypatch.setenv("COURSE_SMOKE_EVAL", "16")
    small = recipes.recipe("gpt", "full")
    assert small.eval_windows == 16 and small.num_samples <= 8 and small.d_model == recipes.GPT_FULL.d_model
