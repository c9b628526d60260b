"""course_utils.recipes: every notebook's fast and full recipe in one convention, picked by
the profile, capped in one place in a smoke test, and building the models the notebooks
build; course_utils.registry: every recipe that trains a model has its model, loss and fit,
and every fit one shape."""

import dataclasses
import functools
import inspect

import pytest
import torch

from course_utils import recipes, registry, runtime

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
    for r in recipes.RECIPES[name]:
        torch.manual_seed(0)
        model = registry.REGISTRY[name].build(r, 20, 30).eval()
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
    es = data.es_en_splits(max_len=recipes.ES_EN_FULL.max_len)
    train = data.TranslationData.build(es.train[:200], min_freq=recipes.ES_EN_FULL.min_freq)
    cfg = recipes.ES_EN_FULL.model_config(train)
    assert (cfg.src_vocab_size, cfg.tgt_vocab_size) == (len(train.src_vocab), len(train.tgt_vocab))
    assert (cfg.hidden_size, cfg.bidirectional, cfg.attention) == (128, True, "additive")
    model = registry.REGISTRY["es_en"].build(recipes.ES_EN_FULL, train)
    assert model.out.out_features == len(train.tgt_vocab), "one output per target word"
    assert recipes.ES_EN_FAST is recipes.ES_EN_FULL


def test_06_s_translators_run_an_es_en_recipe_of_its_mt_fields(monkeypatch):
    """06 trains 02's English -> Spanish model twice (words, BPE pieces) through ``fit_seq2seq``
    with ``mt_recipe()``: the ``mt_`` fields as an ``EsEnTraining``, whose model is the one 06
    builds, and which a smoke test caps through them."""
    from course_utils import data
    from course_utils.seq2seq import Seq2SeqConfig
    train = data.TranslationData.build(data.synthetic_pairs(20, seed=0))
    for bpe in recipes.RECIPES["bpe"]:
        mt = bpe.mt_recipe()
        assert isinstance(mt, recipes.EsEnTraining)
        assert (mt.lr, mt.batch_size, mt.steps, mt.emb_size, mt.hidden_size, mt.min_freq, mt.max_len) == (
            bpe.mt_lr, bpe.mt_batch_size, bpe.mt_steps, bpe.mt_emb_size, bpe.mt_hidden_size, bpe.mt_min_freq,
            bpe.mt_max_words)
        assert mt.model_config(train) == Seq2SeqConfig(len(train.src_vocab), len(train.tgt_vocab),
                                                       emb_size=bpe.mt_emb_size, hidden_size=bpe.mt_hidden_size,
                                                       bidirectional=True, attention="additive")
    monkeypatch.setenv("COURSE_SMOKE_STEPS", "2")
    smoke = recipes.recipe("bpe", "full").mt_recipe()
    assert (smoke.steps, smoke.batch_size) == (2, recipes.SMOKE_BATCH)


# -- the registry: each recipe's model, loss and fit ------------------------------------------

TEXTS = ["Elizabeth walked to Longbourn with Jane.", "Mr. Darcy said nothing at all.",
         "Anne Elliot was at Kellynch.", "Captain Wentworth wrote a letter."] * 10


def test_every_recipe_that_trains_a_model_has_its_model_loss_and_fit():
    trains = {name for name, pair in recipes.RECIPES.items() if hasattr(pair.fast, "model_config")}
    assert set(registry.REGISTRY) == trains
    # 06 trains tokenisers (its translators: an es_en recipe, above); 07b measures a pre-trained model
    assert set(recipes.RECIPES) - trains == {"bpe", "llm"}
    for name, entry in registry.REGISTRY.items():
        assert issubclass(entry.model, torch.nn.Module) and callable(entry.loss) and callable(entry.fit), name


@pytest.mark.parametrize("name", sorted(registry.REGISTRY))
def test_every_fit_has_one_shape_the_model_what_it_trains_on_the_recipe(name):
    """``fit(model, data..., recipe, *keywords)``: what it trains on is one argument (pairs, a token
    stream) or two (images and labels; a tokenizer and NSP pairs); after the recipe, only
    arguments with defaults, ``progress`` among them."""
    params = inspect.signature(registry.REGISTRY[name].fit).parameters
    names = list(params)
    assert names[0] == "model" and names.index("recipe") in (2, 3), names
    required = [n for n, p in params.items() if p.default is inspect.Parameter.empty]
    assert required == names[:names.index("recipe") + 1] and "progress" in names, names
    # a budget other than the recipe's is asked for by one name everywhere, train()'s own
    assert not {n for n in names if "step" in n} - {"max_steps"}, names


@functools.cache
def _pairs():
    from course_utils import data
    return data.TranslationData.build(data.synthetic_pairs(40, seed=0))


@functools.cache
def _wordpiece():
    from course_utils.bert_training import train_wordpiece_tokenizer
    return train_wordpiece_tokenizer(TEXTS, vocab_size=120)


def _tiny(name, recipe):
    """(the sizes ``build`` takes, what ``fit`` trains on, one batch for the loss) of recipe
    ``name``: a few examples of its kind of data."""
    generator = torch.Generator().manual_seed(0)
    if name == "gpt":
        from course_utils.gpt_training import random_windows
        tokens = torch.randint(0, 50, (4 * recipe.max_len,), generator=generator)
        return (50,), (tokens,), random_windows(tokens, recipe.max_len, 2, generator)
    if name == "vit":
        images, labels = torch.rand(16, 1, 8, 8, generator=generator), torch.randint(0, 10, (16,), generator=generator)
        return (), (images, labels), (images[:4], labels[:4])
    if name == "bert":
        from course_utils import novels
        from course_utils.bert_training import pretraining_batches
        docs = [novels.split_sentences(" ".join(TEXTS[i:i + 4])) for i in range(0, 40, 4)]
        pairs = novels.nsp_pairs(docs, 16)
        return (), (_wordpiece(), pairs), next(iter(pretraining_batches(_wordpiece(), pairs, 4, recipe.max_len)(0)))
    pairs = _pairs()
    sizes = (pairs,) if name == "es_en" else (len(pairs.src_vocab), len(pairs.tgt_vocab))
    return sizes, (pairs,), pairs.batches(4)[0]


@pytest.mark.parametrize("name", sorted(registry.REGISTRY))
def test_each_entry_builds_its_recipes_model_and_its_loss_runs_on_a_tiny_batch(name):
    """Fast and full: ``build`` gives the entry's model class, and the entry's loss of it on a
    few examples is one finite number that reaches the weights."""
    entry = registry.REGISTRY[name]
    for r in recipes.RECIPES[name]:
        sizes, _, batch = _tiny(name, r)
        torch.manual_seed(0)
        model = entry.build(r, *sizes)
        assert type(model) is entry.model
        loss = entry.loss(model, batch)
        assert loss.dim() == 0 and torch.isfinite(loss), (name, loss)
        loss.backward()
        assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters()), name


@pytest.mark.parametrize("name", sorted(registry.REGISTRY))
def test_a_smoke_recipe_trains_through_its_fit_for_its_capped_steps(name, monkeypatch):
    """The fits take their steps from the recipe they are given: a smoke test's recipe runs
    its 2 steps (the warm-up schedules fit in them), the fit itself knows no smoke test."""
    monkeypatch.setenv("COURSE_SMOKE_STEPS", "2")
    smoke = recipes.recipe(name, "fast")
    entry = registry.REGISTRY[name]
    sizes, data, _ = _tiny(name, smoke)
    torch.manual_seed(0)
    result = entry.fit(entry.build(smoke, *sizes), *data, smoke, progress=False)
    history = result[0] if name == "bert" else result      # BERT's pre-training: (History, PretrainingLog)
    assert history.num_steps == 2
