"""scripts/choose_fine_tuning_rates.py: the record of 05b's fine-tuning learning rates tried on a
validation split (results/fine_tuning_rates.json) knows the recipe's rates, its choices are the
best means, and the split is taken from the training data only. No training here: the record is read, the splits are built."""

import json
from collections import Counter

import pytest

from course_utils import data, recipes
from scripts import choose_fine_tuning_rates as choose


RECORD = json.loads(choose.RECORD.read_text())


@pytest.mark.parametrize("profile", sorted(RECORD))
def test_the_record_was_measured_beside_the_recipe_as_it_is(profile):
    # 05b's appendix sets the recipe's rates beside the validation choices: the record must know
    # the recipe's rates as they are now, and have tried them. (The recipe does not take the
    # choices yet: at one rate per family, the from-scratch start gains and the pre-trained pair
    # head loses, so the rates are to be chosen per start and task; 05b's appendix.)
    entry = RECORD[profile]
    recipe = getattr(recipes.RECIPES["bert"], profile)
    assert set(choose.RECIPE_FIELD) <= set(entry["recipe"])
    for family in entry["recipe"]:      # the two families, and any other start recorded
        field = choose.STARTS[family].recipe_field
        assert getattr(recipe, field) == entry["recipe"][family], (
            f"recipes.BERT_{profile.upper()}.{field} = {getattr(recipe, field):g}, the record has "
            f"{entry['recipe'][family]:g} for {family}: run scripts/choose_fine_tuning_rates.py --profile {profile} again")
        assert getattr(recipe, field) in entry["grid"][family], f"{field} was not among the rates tried for {family}"


@pytest.mark.parametrize("profile", sorted(RECORD))
def test_the_record_chose_the_best_mean_over_tasks_and_seeds(profile):
    entry = RECORD[profile]
    # the starts recorded (at least the two families), each with its grid and its tasks (all
    # of them unless the record says otherwise: random_minilm runs on recipe.minilm_control_tasks)
    assert set(choose.RECIPE_FIELD) <= set(entry["grid"]) == set(entry["scores"]) <= set(choose.STARTS)
    assert entry["grid"] == {family: list(choose.GRID[family]) for family in entry["grid"]}
    for family, by_rate in entry["scores"].items():
        tasks = entry.get("tasks", {}).get(family, choose.TASKS)
        field = choose.STARTS[family].tasks     # a recipe field naming the start's tasks, or None
        assert list(tasks) == [t for t in choose.TASKS
                               if field is None or t in getattr(getattr(recipes.RECIPES["bert"], profile), field)]
        assert sorted(map(float, by_rate)) == sorted(choose.GRID[family])
        assert all(sorted(by_task) == sorted(tasks) and len(by_seed) == len(entry["seeds"])
                   for by_task in by_rate.values() for by_seed in by_task.values())
        assert float(choose.choose(by_rate)) == entry["chosen"][family]


def test_choose_takes_the_best_mean_over_tasks_and_seeds():
    scores = {"1e-4": {"books": {"0": 0.9, "1": 0.9}, "names": {"0": 0.1, "1": 0.1}},     # mean 0.5
              "3e-4": {"books": {"0": 0.6, "1": 0.6}, "names": {"0": 0.5, "1": 0.6}}}     # mean 0.575
    assert choose.choose(scores) == "3e-4"


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
    for task in choose.TASKS:
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
