"""scripts/choose_fine_tuning_rates.py: the record of 05b's fine-tuning learning rates tried on a
validation split (results/fine_tuning_rates.json) knows the recipe's rates, its choices are the
best means, and the split is taken from the training data only. No training here: the record is read, the splits are built."""

import json
from collections import Counter

import pytest

from course_utils import data, novels, recipes
from scripts import choose_fine_tuning_rates as choose


RECORD = json.loads(choose.RECORD.read_text())


@pytest.mark.parametrize("profile", sorted(RECORD))
def test_the_recipe_takes_the_rates_chosen_on_validation(profile):
    # 05b and 07 fine-tune at recipe.fine_tune_lr: every start's rate on every task is the record's choice
    entry = RECORD[profile]
    recipe = getattr(recipes.RECIPES["bert"], profile)
    assert set(entry["chosen"]) == set(choose.STARTS), (
        f"the {profile} record has no choice for {sorted(set(choose.STARTS) - set(entry['chosen']))}: "
        f"run scripts/choose_fine_tuning_rates.py --profile {profile} --starts ... --keep")
    assert recipe.fine_tune_lr == entry["chosen"], (
        f"recipes.BERT_{profile.upper()}.fine_tune_lr = {recipe.fine_tune_lr}, validation chose {entry['chosen']}")


@pytest.mark.parametrize("profile", sorted(RECORD))
def test_the_record_chose_the_best_mean_over_seeds_per_start_and_task(profile):
    entry = RECORD[profile]
    recipe = getattr(recipes.RECIPES["bert"], profile)
    # each start recorded with its grid and its tasks (random_minilm: recipe.minilm_control_tasks)
    assert set(entry["grid"]) == set(entry["scores"]) == set(entry["chosen"]) <= set(choose.STARTS)
    assert entry["grid"] == {name: list(choose.GRID[name]) for name in entry["grid"]}
    for name, by_rate in entry["scores"].items():
        start = choose.STARTS[name]
        tasks = [t for t in start.tasks if start.tasks_field is None or t in getattr(recipe, start.tasks_field)]
        assert entry["tasks"][name] == tasks
        assert sorted(map(float, by_rate)) == sorted(choose.GRID[name])
        assert all(sorted(by_task) == sorted(tasks) and len(by_seed) == len(entry["seeds"])
                   for by_task in by_rate.values() for by_seed in by_task.values())
        assert sorted(entry["chosen"][name]) == sorted(tasks)
        for task in tasks:
            means = {rate: sum(by_task[task].values()) / len(by_task[task]) for rate, by_task in by_rate.items()}
            best = max(means.values())
            assert means[f"{entry['chosen'][name][task]:g}"] == best, (name, task)
            first = next(rate for rate in map(float, by_rate) if means[f"{rate:g}"] == best)   # ties: the first in the grid
            assert entry["chosen"][name][task] == first


def test_each_task_gets_the_rate_of_its_best_mean_over_seeds():
    scores = {"1e-4": {"books": {"0": 0.9, "1": 0.9}, "names": {"0": 0.1, "1": 0.1}},
              "3e-4": {"books": {"0": 0.6, "1": 0.6}, "names": {"0": 0.5, "1": 0.6}},
              "1e-3": {"books": {"0": 0.95, "1": 0.85}, "names": {"0": 0.55, "1": 0.55}}}   # books: a tie
    assert choose.choices(scores) == {"books": 1e-4, "names": 3e-4}     # a tie goes to the first rate
    assert choose.choose({"1e-4": {"0": 0.2}, "3e-4": {"0": 0.4, "1": 0.2}}) == "3e-4"


def test_stratified_split_is_disjoint_deterministic_and_keeps_the_classes_balanced():
    examples = [(f"passage {i}", i % 3) for i in range(30)] + [(f"extra {i}", 0) for i in range(10)]
    labels = [y for _, y in examples]
    train, valid = choose.stratified_split(examples, labels, share=0.2, seed=0)
    assert sorted(train + valid) == sorted(examples) and not set(train) & set(valid)
    assert Counter(y for _, y in valid) == {0: 4, 1: 2, 2: 2}     # 20 % of 20, 10 and 10
    assert (train, valid) == choose.stratified_split(examples, labels, share=0.2, seed=0)
    assert valid != choose.stratified_split(examples, labels, share=0.2, seed=1)[1]
    with pytest.raises(ValueError, match="share"):
        choose.stratified_split(examples, labels, share=1.0)


def test_group_split_holds_out_one_group():
    train, valid = choose.group_split(["a", "b", "c", "d"], ["x", "y", "x", "x + y"], "x")
    assert (train, valid) == (["b", "d"], ["a", "c"])
    with pytest.raises(ValueError, match="no example"):
        choose.group_split(["a"], ["x"], "z")


@pytest.fixture(scope="module")
def paragraphs():
    return data.load_english_text()


@pytest.mark.parametrize("profile", ["fast", "full"])
def test_the_validation_splits_come_from_the_training_data_only(paragraphs, profile):
    recipe = getattr(recipes.RECIPES["bert"], profile)
    nb = choose.notebook_data(recipe, paragraphs)
    splits = choose.validation_splits(recipe, paragraphs)
    assert splits == choose.validation_splits(recipe, paragraphs)       # deterministic
    as_key = lambda example: repr(example)
    for task in ("books", "names"):
        train, valid = splits[task]
        notebook_train = nb[f"{task}_train"]
        test = {as_key(x) for x in nb[f"{task}_test"]}
        # train + valid is the notebook's training data, split without overlap; no test example in either
        assert sorted(map(as_key, train + valid)) == sorted(map(as_key, notebook_train))
        assert not {as_key(x) for x in train} & {as_key(x) for x in valid}
        assert not test & {as_key(x) for x in train + valid}
        assert 0.15 < len(valid) / len(notebook_train) < 0.35
    # books: each novel keeps 20 % of its passages in validation
    valid_books = Counter(y for _, y in splits["books"][1])
    assert set(valid_books.values()) == {round(choose.VALID_SHARE * recipe.book_train_per_class)}
    assert len(valid_books) == len(nb["book_names"])
    # names: validation is one training novel, unseen in the tagger's training (as the test novels are)
    books_of = choose.sentence_books(nb["train_paragraphs"], nb["names_train"], nb["names_books"])
    valid_names = [x for x, b in zip(nb["names_train"], books_of) if b == choose.VALID_BOOK]
    assert splits["names"][1] == valid_names and choose.VALID_BOOK not in choose.HELD_OUT_BOOKS


@pytest.mark.parametrize("profile", ["fast", "full"])
def test_section_8s_validation_pairs_and_questions_come_from_training_paragraphs(paragraphs, profile):
    # pairs and questions are drawn from paragraphs, as the notebook draws its training and test
    # ones: validation from every 4th training paragraph, training from the others; none from a
    # test paragraph
    recipe = getattr(recipes.RECIPES["bert"], profile)
    nb = choose.notebook_data(recipe, paragraphs)
    splits = choose.validation_splits(recipe, paragraphs)
    rest, held = novels.split_paragraphs(nb["train_paragraphs"], test_every=choose.VALID_EVERY)
    _, test_paragraphs = novels.split_paragraphs(paragraphs)
    assert 0.15 < len(held) / len(nb["train_paragraphs"]) < 0.35
    text = lambda ps: "\n".join(p.text for p in ps)
    held_text, rest_text, test_text = text(held), text(rest), text(test_paragraphs)
    for task in ("pair", "span"):
        train, valid = splits[task]
        if task == "pair":      # as many pairs as the notebook draws
            assert (len(train), len(valid)) == (len(nb["pair_train"]), len(nb["pair_test"]))
        else:                   # questions: all there are, up to the recipe's counts (fewer paragraphs, fewer)
            assert 0.6 * len(nb["span_train"]) < len(train) <= recipe.qa_train
            assert 0.3 * len(nb["span_test"]) < len(valid) <= recipe.qa_test
        assert not {repr(x) for x in nb[f"{task}_test"]} & {repr(x) for x in train + valid}
        assert not {repr(x) for x in train} & {repr(x) for x in valid}
    # every validation pair's two sentences are in held-out training paragraphs; the training
    # pairs' in the others (a sentence may recur word for word elsewhere: "Yes.")
    pair_train, pair_valid = splits["pair"]
    assert all(a in held_text and b in held_text for a, b, _ in pair_valid)
    assert all(a in rest_text and b in rest_text for a, b, _ in pair_train)
    assert sum(b in test_text for _, b, _ in pair_valid) < 0.05 * len(pair_valid)
    assert sum(label for *_, label in pair_valid) == len(pair_valid) // 2
    span_train, span_valid = splits["span"]
    # no sentence asked about in validation is asked about in training or in the test
    passages = lambda questions: {tuple(q.passage) for q in questions}
    assert not passages(span_valid) & (passages(span_train) | passages(nb["span_test"]))
