"""a2_transformer judged outside the student's process (``grader.verdicts``): for each
test cell but the trained model's, the calls the sandbox makes with the student's functions
and classes (classes get the weights of a reference module, sent as data) and the reference
implementations of course_utils that the grader compares them with (the loss with its
gradients: ``grad=True``, a loss computed outside autograd scores nothing). test_translation: the
student's Transformer with the student's weights must give the reference one's logits (in
the sandbox); the grader then translates with the reference class holding those weights and
computes BLEU itself. Keep the cases in step with the test cells of a2_transformer.ipynb
(nbgrader still runs those)."""

from grader import verdicts as grader_verdicts
from grader.verdicts import Question
from grader.verdicts import call as _call

# course code that computes a question's answer without being compared with it: the output of
# attention by torch's fused kernel (the course reaching it would pass the refusal of the kernel)
REFERENCE_CODE = ["course_utils.attention.fused_attention"]


def _module(cls, init, seed, args, hidden=False, method=None):
    """A call of ``cls(*init)`` given the weights of the reference ``cls(*init)`` made under ``seed``."""
    import torch
    torch.manual_seed(seed)
    state = reference()[cls](*init).state_dict()
    out = _call(cls, *args, hidden=hidden, init=list(init), state=dict(state))
    if method:
        out["method"] = method
    return out


def reference():
    from course_utils import attention, positional, transformer

    class EncoderLayer(transformer.EncoderLayer):
        def forward(self, x, mask=None):
            return super().forward(x, mask)[0]

    class DecoderLayer(transformer.DecoderLayer):
        def forward(self, y, memory, self_mask=None, memory_mask=None):
            return super().forward(y, memory, self_mask, memory_mask)[0]

    def transformer_config(**kwargs):
        return transformer.TransformerConfig(**kwargs)

    return {"scaled_dot_product_attention": lambda q, k, v, mask=None: attention.scaled_dot_product_attention(q, k, v, mask),
            "padding_mask": attention.padding_mask, "causal_mask": attention.causal_mask,
            "sinusoidal_encoding": positional.sinusoidal_encoding,
            "MultiHeadAttention": attention.MultiHeadAttention, "EncoderLayer": EncoderLayer,
            "DecoderLayer": DecoderLayer, "Transformer": transformer.Transformer,
            "TransformerConfig": transformer_config, "loss_fn": transformer.transformer_loss}


def attention_calls():
    import torch
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 6)
    calls = [_call("scaled_dot_product_attention", q, k, v),
             _call("scaled_dot_product_attention", q, k, v, torch.tensor([True, True, False, True, False]).expand(3, 5)),
             _call("scaled_dot_product_attention", q, k, v, torch.tensor([[True] * 5, [False] * 5, [True] * 5]))]
    torch.manual_seed(7)
    q, k, v = torch.randn(3, 2, 4, 8), torch.randn(3, 2, 6, 8), torch.randn(3, 2, 6, 5)
    mask = (torch.arange(6)[None, :] < torch.tensor([6, 2, 1])[:, None])[:, None, None, :]
    full = torch.zeros(4, 6, dtype=torch.bool)
    full[0] = True
    return calls + [_call("scaled_dot_product_attention", q, k, v, mask, hidden=True),
                    _call("scaled_dot_product_attention", q, k, v, full, hidden=True)]


def masks_calls():
    import torch
    torch.manual_seed(3)
    lengths = torch.randint(1, 20, (50,))
    return ([_call("padding_mask", torch.tensor([3, 1, 4])), _call("padding_mask", torch.tensor([2]), 5),
             _call("causal_mask", 3), _call("causal_mask", 1)]
            + [_call("causal_mask", n, hidden=True) for n in (2, 7, 30)]
            + [_call("padding_mask", lengths, hidden=True), _call("padding_mask", lengths, 25, hidden=True)])


def positional_calls():
    return [_call("sinusoidal_encoding", 50, 8)] + [
        _call("sinusoidal_encoding", n, d, hidden=True) for n, d in ((1, 2), (7, 64), (256, 16), (100, 128))]


def mha_calls():
    import torch
    torch.manual_seed(0)
    x = torch.randn(2, 5, 8)
    is_pad = torch.arange(5)[None, :] >= torch.tensor([5, 3])[:, None]
    from course_utils.attention import causal_mask
    torch.manual_seed(8)
    q, kv = torch.randn(4, 3, 12), torch.randn(4, 7, 12)
    pad = torch.arange(7)[None, :] >= torch.tensor([7, 6, 2, 1])[:, None]
    return [_module("MultiHeadAttention", (8, 2), 0, [x, x, x, ~is_pad.unsqueeze(1)]),
            _module("MultiHeadAttention", (8, 2), 0, [x, x, x, causal_mask(5)]),
            _module("MultiHeadAttention", (12, 3), 8, [q, kv, kv, ~pad.unsqueeze(1)], hidden=True)]


def encoder_calls():
    import torch
    torch.manual_seed(0)
    x = torch.randn(2, 5, 8)
    is_pad = torch.arange(5)[None, :] >= torch.tensor([5, 3])[:, None]
    torch.manual_seed(9)
    x2 = torch.randn(3, 6, 12)
    pad = torch.arange(6)[None, :] >= torch.tensor([6, 2, 1])[:, None]
    return [_module("EncoderLayer", (8, 2, 16), 0, [x, ~is_pad.unsqueeze(1)]),
            _module("EncoderLayer", (12, 3, 20), 9, [x2, ~pad.unsqueeze(1)], hidden=True)]


def decoder_calls():
    import torch
    from course_utils.attention import causal_mask
    torch.manual_seed(0)
    y, memory = torch.randn(2, 4, 8), torch.randn(2, 5, 8)
    is_pad = torch.arange(5)[None, :] >= torch.tensor([5, 3])[:, None]
    later = y.clone()
    later[:, 1:] = torch.randn(2, 3, 8)
    torch.manual_seed(10)
    y2, m2 = torch.randn(3, 6, 12), torch.randn(3, 4, 12)
    pad = torch.arange(4)[None, :] >= torch.tensor([4, 2, 1])[:, None]
    return [_module("DecoderLayer", (8, 2, 16), 0, [y, memory, causal_mask(4), ~is_pad.unsqueeze(1)]),
            _module("DecoderLayer", (8, 2, 16), 0, [later, memory, causal_mask(4), ~is_pad.unsqueeze(1)]),
            _module("DecoderLayer", (12, 3, 20), 10, [y2, m2, causal_mask(6), ~pad.unsqueeze(1)], hidden=True)]


SMALL = dict(src_vocab_size=11, tgt_vocab_size=13, d_model=8, num_heads=2, num_encoder_layers=2,
             num_decoder_layers=2, d_ff=16, dropout=0.0)
HIDDEN = dict(src_vocab_size=17, tgt_vocab_size=19, d_model=12, num_heads=3, num_encoder_layers=2,
              num_decoder_layers=1, d_ff=20, dropout=0.0)


def _model(config: dict, seed: int) -> dict:
    """The spec of the student's ``Transformer`` given the reference one's weights."""
    import torch
    ref = reference()
    torch.manual_seed(seed)
    state = ref["Transformer"](ref["TransformerConfig"](**config)).state_dict()
    return {"fn": "Transformer", "init": [{"$make": {"fn": "TransformerConfig", "args": [], "kwargs": config}}],
            "state": dict(state)}


def transformer_calls():
    import torch
    from course_utils.data import PAD_ID
    src = torch.tensor([[5, 6, 7, 2], [8, 2, 0, 0]])
    lengths = torch.tensor([4, 2])
    tgt_in = torch.tensor([[1, 4, 5, 6, 7], [1, 9, 10, 0, 0]])
    changed = tgt_in.clone()
    changed[:, 3:] = 12
    other_pad = src.clone()
    other_pad[1, 2:] = 9
    swapped = src.clone()
    swapped[0, [0, 1]] = swapped[0, [1, 0]]
    torch.manual_seed(11)
    src2 = torch.randint(4, 17, (5, 8))
    len2 = torch.tensor([8, 7, 4, 2, 1])
    src2[torch.arange(8)[None, :] >= len2[:, None]] = PAD_ID
    tgt2 = torch.randint(3, 19, (5, 6))
    calls = [{**_model(SMALL, 0), "args": [s, lengths, t], "hidden": False}
             for s, t in ((src, tgt_in), (src, changed), (other_pad, tgt_in), (swapped, tgt_in))]
    return calls + [{**_model(HIDDEN, 11), "args": [src2, len2, tgt2], "hidden": True}]


def loss_calls():
    import torch
    from course_utils.data import TranslationData, load_synthetic
    data = TranslationData.build(load_synthetic().train)
    config = dict(src_vocab_size=len(data.src_vocab), tgt_vocab_size=len(data.tgt_vocab), d_model=8, num_heads=2,
                  num_encoder_layers=1, num_decoder_layers=1, d_ff=16, dropout=0.0)
    torch.manual_seed(12)
    model = {"$make": _model(config, 12)}
    calls = []
    for i, b in enumerate(data.batches(16, shuffle=True, by_length=False)[:3]):
        fields = {k: getattr(b, k) for k in ("src", "src_lengths", "tgt", "tgt_lengths", "index")}
        calls.append(_call("loss_fn", model, {"$batch": fields}, hidden=i > 0, grad=True))
    return calls


def config():
    """The notebook's ``cfg`` (cell train_or_load)."""
    from course_utils.recipes import TRANSFORMER_FAST
    _, data = grader_verdicts.synthetic()
    return TRANSFORMER_FAST.model_config(len(data.src_vocab), len(data.tgt_vocab))


def _reference_model(cfg):
    from course_utils.transformer import Transformer
    return Transformer(cfg)


QUESTIONS = {
    "test_attention": Question(attention_calls, reference),
    "test_masks": Question(masks_calls, reference),
    "test_positional_encoding": Question(positional_calls, reference),
    "test_multi_head_attention": Question(mha_calls, reference),
    "test_encoder_layer": Question(encoder_calls, reference),
    "test_decoder_layer": Question(decoder_calls, reference),
    "test_transformer": Question(transformer_calls, reference),
    "test_loss": Question(loss_calls, reference),
    "test_translation": grader_verdicts.translation_question(
        "transformer.pt", "Transformer", "TransformerConfig", config, _reference_model, reference),
}
