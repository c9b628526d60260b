"""course_utils.recipes: every notebook's fast and full recipe in one convention, picked by
the profile, capped in one place in a smoke test, and building the models the notebooks
build."""

import dataclasses

import pytest

from course_utils import recipes, runtime

NAMES = sorted(recipes.RECIPES)


@pytest.fixture
def no_smoke(monkeypatch):
    monkeypatch.delenv("COURSE_SMOKE_STEPS", raising=False)
    monkeypatch.delenv("COURSE_SMOKE_EVAL", raising=False)


def test_every_notebook_that_trains_has_its_pair_of_one_class():
    assert NAMES == ["attention", "bert", "bpe", "convs2s", "es_en", "gpt", "llm", "seq2seq", "transformer",
                     "transformer_comparison", "vit"]
    for name, (fast, full) in recipes.RECIPES.items():
        assert dataclasses.is_dataclass(fast) and type(fast) is type(full), name
        assert type(fast).__dataclass_params__.frozen, f"{name}: a recipe is frozen (vary it with replace)"
        constant = f"{name.upper()}_FAST"
        assert getattr(recipes, constant) is fast and getattr(recipes, f"{name.upper()}_FULL") is full


@pytest.mark.parametrize("name", NAMES)
def test_outside_a_smoke_test_the_profile_gets_its_recipe_itself(name, no_smoke, monkeypatch):
    fast, full = recipes.RECIPES[name]
    assert recipes.recipe(name, "fast") is fast and recipes.recipe(name, "full") is full
    monkeypatch.setenv("COURSE_PROFILE", "full")
    assert recipes.recipe(name) is full
    monkeypatch.setenv("COURSE_PROFILE", "fast")
    assert recipes.recipe(name) is fast


@pytest.mark.parametrize("name", NAMES)
def test_a_smoke_test_keeps_the_models_and_caps_every_count_of_steps_and_every_batch(name, monkeypatch):
    monkeypatch.setenv("COURSE_SMOKE_STEPS", "2")
    monkeypatch.delenv("COURSE_SMOKE_EVAL", raising=False)
    full = recipes.RECIPES[name].full
    smoke = recipes.recipe(name, "full")
    names = [f.name for f in dataclasses.fields(full)]
    batches = [f for f in names if f.endswith(("batch_size", "_batch"))]
    assert batches, f"{name} has no batch size"
    for field in batches:
        if getattr(full, field) is not None:
            assert getattr(smoke, field) == min(getattr(full, field), recipes.SMOKE_BATCH), field
    for field in (f for f in names if f.endswith("steps")):   # 'bpe': mt_steps; 'vit': max_steps, ...
        if getattr(full, field) is not None:
            assert getattr(smoke, field) == min(getattr(full, field), 2), field
    kept = {"d_model", "num_layers", "num_heads", "d_ff", "hidden_size", "emb_size", "vocab_size", "max_len", "lr"}
    for field in kept & set(names):
        assert getattr(smoke, field) == getattr(full, field), f"{name}.{field} changed in a smoke test"


@pytest.mark.parametrize("name", ["transformer", "transformer_comparison", "vit", "gpt"])
def test_a_smoke_recipe_trains_through_its_fit_for_its_capped_steps(name, monkeypatch):
    """The fits take their steps from the recipe they are given: a smoke test's recipe runs
    its 2 steps (the warm-up schedules fit in them), the fit itself knows no smoke test."""
    import torch
    monkeypatch.setenv("COURSE_SMOKE_STEPS", "2")
    smoke = recipes.recipe(name, "fast")
    torch.manual_seed(0)
    if name.startswith("transformer"):
        from course_utils import data, transformer
        from course_utils.translation_training import fit_transformer
        train = data.TranslationData.build(data.synthetic_pairs(40, seed=0))
        model = transformer.Transformer(smoke.model_config(len(train.src_vocab), len(train.tgt_vocab)))
        history = fit_transformer(model, train, smoke, progress=False)
    elif name == "vit":
        from course_utils import vit, vit_training
        images, labels = torch.rand(16, 1, 8, 8), torch.randint(0, 10, (16,))
        model = vit.ViT(smoke.model_config(image_size=8))
        history = vit_training.fit(model, images, labels, smoke)
    elif name == "gpt":
        from course_utils import gpt, gpt_training
        model = gpt.GPT(smoke.model_config(50))
        history = gpt_training.fit(model, torch.randint(0, 50, (4 * smoke.max_len,)), smoke)
    assert history.num_steps == 2


def test_the_smoke_caps_of_05_06_07(monkeypatch):
    monkeypatch.setenv("COURSE_SMOKE_STEPS", "2")
    monkeypatch.setenv("COURSE_SMOKE_EVAL", "16")
    bert = recipes.recipe("bert", "full")
    assert (bert.names_test, bert.qa_train, bert.heldout_pairs, bert.num_pairs) == (16, 16, 16, 128)
    assert bert.book_train_per_class == 2 and bert.model_config() == recipes.BERT_FULL.model_config()
    bpe = recipes.recipe("bpe", "full")
    assert bpe.num_merges == bpe.mt_merges == recipes.SMOKE_MERGES and bpe.wordpiece_merges == 100
    gpt = recipes.recipe("gpt", "full")
    assert (gpt.eval_windows, gpt.num_samples, gpt.sample_tokens, gpt.fine_tune_seeds) == (16, 8, 16, (0,))


def test_an_unknown_name_or_profile_is_refused_with_the_choices(no_smoke):
    with pytest.raises(ValueError, match="no recipe named 'bart': expected one of attention, bert, bpe"):
        recipes.recipe("bart")
    with pytest.raises(ValueError, match="profile must be one of"):
        recipes.recipe("vit", "medium")


def test_01_and_02_build_the_models_their_notebooks_describe():
    seq = recipes.SEQ2SEQ_FAST.model_config(105, 131)
    assert (seq.emb_size, seq.hidden_size, seq.bidirectional, seq.attention) == (64, 128, False, None)
    assert recipes.SEQ2SEQ_FULL.model_config(105, 131, hidden_size=64).hidden_size == 64
    att = recipes.ATTENTION_FULL.model_config(105, 131)
    assert (att.hidden_size, att.bidirectional, att.attention) == (128, True, "additive")
    assert recipes.ATTENTION_FULL.batch_size == 2 * recipes.ATTENTION_FAST.batch_size
    # 02 trains its fixed-context baseline beside it; 01's budget in the fast profile
    assert recipes.ATTENTION_FAST.steps == recipes.SEQ2SEQ_FAST.steps


@pytest.mark.parametrize("name", ["convs2s", "transformer", "transformer_comparison", "seq2seq", "attention"])
def test_the_translation_recipes_build_models_that_translate_between_their_vocabularies(name):
    """Each recipe's model, made for a 20-word source and a 30-word target vocabulary, maps a
    padded batch to one finite distribution over the 30 target words per target position, and
    its padded source positions do not change the outputs of the unpadded sentence."""
    import torch
    from course_utils import convs2s, seq2seq, transformer
    model_class = {"convs2s": convs2s.ConvS2S, "seq2seq": seq2seq.Seq2Seq, "attention": seq2seq.Seq2Seq}.get(
        name, transformer.Transformer)
    for r in recipes.RECIPES[name]:
        torch.manual_seed(0)
        model = model_class(r.model_config(20, 30)).eval()
        src = torch.randint(4, 20, (2, 7))
        lengths = torch.tensor([7, 4])
        src[1, 4:] = 0                                            # padding after the second sentence
        tgt_in = torch.randint(4, 30, (2, 5))
        with torch.no_grad():
            first = lambda out: out[0] if isinstance(out, tuple) else out   # the GRUs return (logits, weights)
            logits = first(model(src, lengths, tgt_in))
            alone = first(model(src[1:, :4], lengths[1:], tgt_in[1:]))
        assert logits.shape == (2, 5, 30) and torch.isfinite(logits).all(), (r, logits.shape)
        torch.testing.assert_close(logits[1:], alone, atol=1e-5, rtol=1e-4)


def test_02_s_english_spanish_recipe_builds_its_model_from_the_data():
    from course_utils import data
    from course_utils.seq2seq import Seq2Seq
    es = data.es_en_splits(max_len=recipes.ES_EN_FULL.max_len)
    train = data.TranslationData.build(es.train[:200], min_freq=recipes.ES_EN_FULL.min_freq)
    cfg = recipes.ES_EN_FULL.model_config(train)
    assert (cfg.src_vocab_size, cfg.tgt_vocab_size) == (len(train.src_vocab), len(train.tgt_vocab))
    assert (cfg.hidden_size, cfg.bidirectional, cfg.attention) == (128, True, "additive")
    model = Seq2Seq(cfg)
    assert model.out.out_features == len(train.tgt_vocab), "one output per target word"
    assert recipes.ES_EN_FAST is recipes.ES_EN_FULL


