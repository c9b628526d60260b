"""a1_bahdanau judged outside the student's process (``grader.verdicts``): for each
test cell but the trained model's, the calls the sandbox makes with the student's classes
(given the weights of a reference module, sent as data) and the course_utils reference the
grader compares them with. The decoder step is judged through ``forward`` (teacher-forced
log-probabilities over several steps: every step is the student's ``decode_step``). The
loss is compared with its gradients (``"grad": True``: a loss computed outside autograd
scores nothing).
test_translation: the student's model with the student's weights must give the reference
model's log-probabilities (in the sandbox); the grader then translates with the reference
class holding those weights and computes BLEU itself. Keep the cases in step with the test
cells of a1_bahdanau.ipynb (nbgrader still runs those)."""

from grader import verdicts as grader_verdicts
from grader.verdicts import Question


#: course code that answers a question without being compared by name (the reference model's
#: decoding step and loss): a tripwire in the sandbox (grader.student_side)
REFERENCE_CODE = ["course_utils.seq2seq.Seq2Seq", "course_utils.seq2seq.seq2seq_loss"]


def reference():
    import torch
    from course_utils import attention, seq2seq
    from course_utils.data import PAD_ID

    class AdditiveAttention(attention.AdditiveAttention):
        def forward(self, query, keys, mask):
            return super().forward(query, keys, mask=mask)

    class AttentionSeq2Seq(seq2seq.Seq2Seq):
        def forward(self, src, src_lengths, tgt_in):
            return torch.log_softmax(super().forward(src, src_lengths, tgt_in)[0], -1)

    def loss_fn(model, batch):
        log_probs = model(batch.src, batch.src_lengths, batch.tgt[:, :-1])
        return torch.nn.functional.nll_loss(log_probs.transpose(1, 2), batch.tgt[:, 1:], ignore_index=PAD_ID)

    return {"AdditiveAttention": AdditiveAttention, "AttentionSeq2Seq": AttentionSeq2Seq,
            "Seq2SeqConfig": lambda **kwargs: seq2seq.Seq2SeqConfig(**kwargs), "loss_fn": loss_fn}


def _weights(cls, init, seed):
    import torch
    torch.manual_seed(seed)
    return dict(reference()[cls](*init).state_dict())


def attention_calls():
    import torch
    keys = torch.tensor([[[0.0], [1.0], [2.0]]])
    hand = {"W1.weight": torch.ones(1, 1), "W2.weight": torch.zeros(1, 1), "v.weight": torch.ones(1, 1)}
    calls = [{"fn": "AdditiveAttention", "init": [1, 1, 1], "state": hand,
              "args": [torch.zeros(1, 1), keys, torch.tensor([[True, True, False]])], "hidden": False}]
    torch.manual_seed(0)
    query, keys = torch.randn(3, 6), torch.randn(3, 7, 4)
    mask = torch.arange(7)[None, :] < torch.tensor([7, 4, 1])[:, None]
    calls.append({"fn": "AdditiveAttention", "init": [6, 4, 5], "state": _weights("AdditiveAttention", (6, 4, 5), 0),
                  "args": [query, keys, mask], "hidden": False})
    for seed in range(5):
        torch.manual_seed(100 + seed)
        q, k = torch.randn(5, 8), torch.randn(5, 9, 10)
        m = torch.arange(9)[None, :] < torch.randint(1, 10, (5,))[:, None]
        calls.append({"fn": "AdditiveAttention", "init": [8, 10, 7], "state": _weights("AdditiveAttention", (8, 10, 7), seed),
                      "args": [q, k, m], "hidden": True})
    return calls


def _model(config: dict, seed: int) -> dict:
    ref = reference()
    import torch
    torch.manual_seed(seed)
    state = ref["AttentionSeq2Seq"](ref["Seq2SeqConfig"](**config)).state_dict()
    return {"fn": "AttentionSeq2Seq", "init": [{"$make": {"fn": "Seq2SeqConfig", "args": [], "kwargs": config}}],
            "state": dict(state)}


SMALL = dict(src_vocab_size=11, tgt_vocab_size=13, emb_size=4, hidden_size=3, bidirectional=True,
             attention="additive", attn_size=5, dropout=0.0)
HIDDEN = dict(src_vocab_size=17, tgt_vocab_size=19, emb_size=6, hidden_size=5, bidirectional=True,
              attention="additive", attn_size=7, dropout=0.0)


def decoder_calls():
    import torch
    from course_utils.data import PAD_ID
    src = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0], [4, 2, 0, 0]])
    lengths = torch.tensor([4, 3, 2])
    tgt = torch.tensor([[1, 4, 5], [1, 6, 7], [1, 8, 9]])
    torch.manual_seed(1)
    src2 = torch.randint(4, 17, (6, 9))
    len2 = torch.tensor([9, 8, 5, 3, 2, 1])
    src2[torch.arange(9)[None, :] >= len2[:, None]] = PAD_ID
    src2[torch.arange(6), len2 - 1] = 2
    tgt2 = torch.randint(3, 19, (6, 7))
    return [{**_model(SMALL, 0), "args": [src, lengths, tgt], "hidden": False},
            {**_model(HIDDEN, 1), "args": [src2, len2, tgt2], "hidden": True}]


def loss_calls():
    import torch
    from course_utils.data import TranslationData, load_synthetic
    data = TranslationData.build(load_synthetic().train)
    config = dict(src_vocab_size=len(data.src_vocab), tgt_vocab_size=len(data.tgt_vocab), emb_size=6, hidden_size=5,
                  bidirectional=True, attention="additive", attn_size=7, dropout=0.0)
    model = {"$make": _model(config, 2)}
    calls = []
    for i, b in enumerate(data.batches(16, shuffle=True, by_length=False)[:3]):
        fields = {k: getattr(b, k) for k in ("src", "src_lengths", "tgt", "tgt_lengths", "index")}
        calls.append({"fn": "loss_fn", "args": [model, {"$batch": fields}], "hidden": i > 0, "grad": True})
    return calls


def config():
    """The notebook's ``cfg`` (cell train_or_load)."""
    from course_utils.seq2seq import Seq2SeqConfig
    _, data = grader_verdicts.synthetic()
    return Seq2SeqConfig(len(data.src_vocab), len(data.tgt_vocab), emb_size=64, hidden_size=64,
                         bidirectional=True, attention="additive", attn_size=64, dropout=0.1)


def _reference_model(cfg):
    from course_utils.seq2seq import Seq2Seq
    return Seq2Seq(cfg)


QUESTIONS = {
    "test_additive_attention": Question(attention_calls, reference),
    "test_decoder_step": Question(decoder_calls, reference),
    "test_loss": Question(loss_calls, reference),
    "test_translation": grader_verdicts.translation_question(
        "bahdanau.pt", "AttentionSeq2Seq", "Seq2SeqConfig", config, _reference_model, reference),
}
