"""a4_bert judged outside the student's process (``grader.verdicts``): for each test
cell but the fine-tuned model's, the calls the sandbox makes with the student's functions
and classes (classes get the weights of a reference module, sent as data; a random number
generator is made in the sandbox by the notebook's read-only ``rng(seed)``) and the
course_utils reference implementations the grader compares them with (the loss with its
gradients with respect to both heads' scores: ``grad=True``). test_accuracy: the
student's BertClassifier with the student's weights must give the reference classifier's
logits on real test passages (in the sandbox); the grader then classifies the 600 held-out
passages with the reference classifier holding those weights and computes the accuracy
itself. Keep the cases in step with the test cells of a4_bert.ipynb (nbgrader still runs
those)."""

import threading

from grader.verdicts import Question, TrainedModelQuestion
from grader.verdicts import call as _call

NUM_BOOKS = 6
CHECKPOINT = "bert_books.pt"
_lock, _cache = threading.Lock(), {}


def data():
    """The notebook's data cell, once per process: cfg, BOOKS, train and test tensors, the
    tokenizer's special ids and [MASK] id."""
    with _lock:
        if not _cache:
            import torch
            from tokenizers import Tokenizer
            from transformers import PreTrainedTokenizerFast

            from course_utils.bert import BertConfig
            from course_utils.bert_training import encode_classification
            from course_utils.data import load_english_text, verified_path
            from course_utils.novels import book_passages, split_paragraphs
            paragraphs = load_english_text()
            train_paragraphs, test_paragraphs = split_paragraphs(paragraphs)
            saved = torch.load(verified_path("small_bert.pt"), map_location="cpu", weights_only=True)
            cfg = BertConfig(**saved["config"])
            tokenizer = PreTrainedTokenizerFast(
                tokenizer_object=Tokenizer.from_str(saved["extra"]["tokenizer"]), unk_token="[UNK]", pad_token="[PAD]",
                cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]",
                model_input_names=["input_ids", "token_type_ids", "attention_mask"])

            def tensors(passages):
                return encode_classification(tokenizer, [t for t, _ in passages], [y for _, y in passages],
                                             cfg.max_len)
            _cache.update(
                cfg=cfg, books=sorted({p.book for p in paragraphs}),
                train=tensors(book_passages(train_paragraphs, 400, seed=0)),
                test=tensors(book_passages(test_paragraphs, 100, seed=1)),
                special=tokenizer.all_special_ids, mask_id=tokenizer.mask_token_id, vocab_size=len(tokenizer),
                encoder={k.removeprefix("bert."): v.float() for k, v in saved["model"].items()
                         if k.startswith("bert.")})
    return _cache


def reference():
    import torch
    from torch import nn

    from course_utils import bert
    from course_utils.bert import BertConfig

    class BertClassifier(bert.SequenceClassifier):
        """The course's classifier, loading weights named as the student's class names them."""
        def __init__(self, cfg, num_labels):
            super().__init__(bert.BertEncoder(cfg), num_labels, dropout=cfg.dropout)

        def load_state_dict(self, state, strict=True, assign=False):
            return super().load_state_dict({(k if k.startswith("head.") else "encoder." + k): v
                                            for k, v in state.items()}, strict)

    class Heads(nn.Module):
        """A 'model' with given head scores, as the package's pretraining_loss calls it."""
        def __init__(self, mlm, nsp):
            super().__init__()
            self.mlm, self.nsp = mlm, nsp

        def forward(self, input_ids, token_type_ids=None, attention_mask=None, labels=None):
            return (self.mlm if labels is None else self.mlm[labels != bert.IGNORE_INDEX]), self.nsp

    def pretraining_loss(mlm_logits, nsp_logits, labels, next_sentence):
        batch = {"input_ids": labels, "token_type_ids": None, "attention_mask": None, "labels": labels,
                 "next_sentence": next_sentence}
        return bert.pretraining_loss(Heads(mlm_logits, nsp_logits), batch)

    return {"mask_tokens": bert.mask_tokens, "rng": lambda seed: torch.Generator().manual_seed(seed),
            "BertConfig": lambda **kwargs: BertConfig(**kwargs), "BertEmbeddings": bert.BertEmbeddings,
            "pretraining_loss": pretraining_loss, "BertClassifier": BertClassifier}


def _rng(seed):
    return {"$make": {"fn": "rng", "args": [seed]}}


def _config(**kwargs):
    return {"$make": {"fn": "BertConfig", "args": [], "kwargs": kwargs}}


def mask_rule_calls():
    import torch
    ids = torch.tensor([[2, 10, 11, 12, 13, 3, 14, 15, 16, 3, 0, 0],
                        [2, 17, 18, 3, 19, 3, 0, 0, 0, 0, 0, 0]])
    calls = [_call("mask_tokens", ids, 20, [0, 1, 2, 3, 4], 4, 0.5, _rng(0))]
    for seed, prob in ((1, 0.15), (2, 0.5), (3, 1.0)):
        hidden_ids = torch.randint(0, 30, (4, 9), generator=torch.Generator().manual_seed(100 + seed))
        calls.append(_call("mask_tokens", hidden_ids, 30, [0, 1, 2, 3, 4], 4, prob, _rng(seed), hidden=True))
    return calls


def mask_bulk_calls():
    import torch
    d = data()
    calls = [_call("mask_tokens", d["train"]["input_ids"], d["vocab_size"], list(d["special"]), d["mask_id"],
                   0.15, _rng(1))]
    calls += [_call("mask_tokens", d["test"]["input_ids"], d["vocab_size"], list(d["special"]), d["mask_id"],
                    0.15, _rng(seed), hidden=True) for seed in (5, 6)]
    ids3 = torch.randint(0, 50, (3, 4, 5), generator=torch.Generator().manual_seed(7))
    return calls + [_call("mask_tokens", ids3, 50, [0, 7, 9], 7, 0.3, _rng(8), hidden=True)]


def _weights(cls, init, seed, std=None):
    """The state dict of the reference ``cls(*init)`` made under ``seed`` (every tensor
    drawn from N(0, std) if given: no zero biases, no unit LayerNorm)."""
    import torch
    torch.manual_seed(seed)
    ref = reference()
    module = ref[cls](*init)
    if std is not None:
        for p in module.parameters():
            torch.nn.init.normal_(p.data, std=std)
    state = module.state_dict()
    if cls == "BertClassifier":  # named as the student's class names them
        state = {k.removeprefix("encoder."): v for k, v in state.items()}
    return dict(state)


def embeddings_calls():
    import torch
    from course_utils.bert import BertConfig
    small = dict(vocab_size=20, d_model=8, num_layers=2, num_heads=2, d_ff=16, max_len=12, dropout=0.0)
    ids = torch.tensor([[2, 10, 11, 12, 13, 3, 14, 15, 16, 3, 0, 0],
                        [2, 17, 18, 3, 19, 3, 0, 0, 0, 0, 0, 0]])
    types = torch.tensor([[0] * 6 + [1] * 4 + [0] * 2, [0] * 4 + [1] * 2 + [0] * 6])
    state = _weights("BertEmbeddings", (BertConfig(**small),), 0)
    calls = [_call("BertEmbeddings", ids, types, init=[_config(**small)], state=state),
             _call("BertEmbeddings", ids[:, :4], types[:, :4], init=[_config(**small)], state=state)]
    hidden = dict(vocab_size=31, d_model=12, num_layers=1, num_heads=3, d_ff=20, max_len=9, dropout=0.0)
    state = _weights("BertEmbeddings", (BertConfig(**hidden),), 13, std=1.0)
    ids = torch.randint(0, 31, (3, 9), generator=torch.Generator().manual_seed(13))
    types = torch.randint(0, 2, (3, 9), generator=torch.Generator().manual_seed(14))
    return calls + [_call("BertEmbeddings", ids, types, init=[_config(**hidden)], state=state, hidden=True),
                    _call("BertEmbeddings", ids[:, :5], types[:, :5], init=[_config(**hidden)], state=state,
                          hidden=True)]


def loss_calls():
    import torch
    labels = torch.tensor([[-100, 7, -100, -100], [-100, -100, 3, 5]])
    next_sentence = torch.tensor([1, 0])
    torch.manual_seed(0)
    mlm, nsp = torch.randn(2, 4, 10), torch.randn(2, 2)
    changed = mlm.clone()
    changed[labels == -100] = 100.0
    calls = [_call("pretraining_loss", torch.zeros(2, 4, 10), torch.zeros(2, 2), labels, next_sentence, grad=True),
             _call("pretraining_loss", mlm, nsp, labels, next_sentence, grad=True),
             _call("pretraining_loss", changed, nsp, labels, next_sentence, grad=True)]
    for seed in (15, 16):
        torch.manual_seed(seed)
        mlm, nsp = torch.randn(5, 7, 13), torch.randn(5, 2)
        labels = torch.where(torch.rand(5, 7) < 0.3, torch.randint(0, 13, (5, 7)), torch.full((5, 7), -100))
        labels[0, 0] = 4
        calls.append(_call("pretraining_loss", mlm, nsp, labels, torch.randint(0, 2, (5,)), hidden=True, grad=True))
    return calls


def _pretrained_classifier_state(num_labels, seed):
    """The encoder of data/small_bert.pt and a head drawn under ``seed``."""
    import torch
    torch.manual_seed(seed)
    head = torch.nn.Linear(data()["cfg"].d_model, num_labels)
    torch.nn.init.normal_(head.weight, std=0.02)
    torch.nn.init.normal_(head.bias, std=0.02)
    return {**data()["encoder"], "head.weight": head.weight.detach(), "head.bias": head.bias.detach()}


def classifier_calls():
    import dataclasses

    import torch
    d = data()
    state = _pretrained_classifier_state(NUM_BOOKS, 0)
    init = [_config(**dataclasses.asdict(d["cfg"])), NUM_BOOKS]
    batch = {k: v[:4] for k, v in d["test"].items()}
    ids, types, mask = batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]
    cut = mask.clone()
    cut[1, 20:] = 0
    other = ids.clone()
    other[1, 20:] = 7
    changed = ids.clone()
    changed[:, 5] = 9
    # one model, five inputs (the weights travel once): the visible test's cases
    calls = [{"fn": "BertClassifier", "init": init, "state": state, "hidden": False,
              "steps": [{"args": args} for args in ([ids, types, mask], [ids], [ids, types, cut], [other, types, cut],
                                                     [changed, types, mask])]}]
    hidden = dict(vocab_size=40, d_model=12, num_layers=2, num_heads=3, d_ff=20, max_len=10, dropout=0.0)
    from course_utils.bert import BertConfig
    hidden_state = _weights("BertClassifier", (BertConfig(**hidden), 5), 16, std=0.3)
    ids = torch.randint(5, 40, (4, 10), generator=torch.Generator().manual_seed(16))
    mask = (torch.arange(10)[None, :] < torch.tensor([10, 7, 3, 1])[:, None]).long()
    types = (torch.arange(10)[None, :] >= torch.tensor([6, 4, 2, 1])[:, None]).long() * mask
    return calls + [_call("BertClassifier", ids, types, mask, init=[_config(**hidden), 5], state=hidden_state,
                          hidden=True)]


# -- the fine-tuned model ---------------------------------------------------------------

def _problem(state) -> str:
    """Why the loaded checkpoint cannot be graded ('' when it can)."""
    from course_utils.training import _config_dict, _with_defaults
    if not isinstance(state, dict) or not isinstance(state.get("model"), dict):
        return f"{CHECKPOINT} is not a checkpoint of the course (save_checkpoint)"
    d = data()
    if _config_dict(d["cfg"]) != _with_defaults(d["cfg"], state.get("config") or {}):
        return f"{CHECKPOINT} was saved with another configuration"
    if (state.get("extra") or {}).get("books") != d["books"]:
        return f"{CHECKPOINT} classifies other novels"
    return ""


def _trained_calls(state):
    import dataclasses
    d = data()
    batch = {k: v[:64] for k, v in d["test"].items()}
    return [{"fn": "BertClassifier", "init": [_config(**dataclasses.asdict(d["cfg"])), NUM_BOOKS],
             "state": dict(state["model"]), "args": [batch["input_ids"], batch["token_type_ids"],
                                                     batch["attention_mask"]],
             "hidden": True, "message": "with the same weights, your model and the reference one disagree"}]


def _verdict(state) -> tuple[bool, str]:
    """The test cell's thresholds, computed here with the reference classifier holding the
    student's weights: accuracy > 0.6 on the 600 held-out passages, and > 0.3 on each novel."""
    import torch
    from course_utils.bert_training import make_batches
    d = data()
    model = reference()["BertClassifier"](d["cfg"], NUM_BOOKS).eval()
    model.load_state_dict(state["model"])
    with torch.no_grad():  # on the CPU, whatever device the grader's machine has
        predicted = torch.cat([model(b["input_ids"], b["token_type_ids"], b["attention_mask"]).argmax(-1)
                               for b in make_batches(d["test"], 64)])
    true = d["test"]["labels"]
    accuracy = (predicted == true).float().mean().item()
    if not accuracy > 0.6:
        return False, f"accuracy {accuracy:.2f} on the held-out passages is too low (more than 0.6 needed)"
    if not min((predicted[true == k] == k).float().mean().item() for k in range(NUM_BOOKS)) > 0.3:
        return False, "a hidden case: a novel is missed (accuracy 0.3 or less on its passages)"
    return True, ""


QUESTIONS = {
    "test_mask_tokens_rule": Question(mask_rule_calls, reference),
    "test_mask_tokens_bulk": Question(mask_bulk_calls, reference),
    "test_embeddings": Question(embeddings_calls, reference),
    "test_pretraining_loss": Question(loss_calls, reference),
    "test_classifier": Question(classifier_calls, reference),
    "test_accuracy": TrainedModelQuestion(CHECKPOINT, _trained_calls, reference, _verdict, _problem),
}
