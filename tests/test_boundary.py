"""Bad input at the boundary: every public function the notebooks call, misused as a student
misuses it (a wrong rank, dtype, size, type, an empty or zero argument, and the traps of
issue 69), must answer with a ValueError or TypeError whose message names the argument, or,
for the cases marked ``accepts``, give the right answer (no NaN, the score sacrebleu gives).

Each case is one small function. ``refuses(kind, name)`` cases must raise a clear error whose
message contains ``name``; ``accepts(kind)`` cases must return and their own asserts hold.
Run this file as a script (``python tests/test_boundary.py``) to count the outcomes: clear,
accepted, cryptic (another exception, or a message not naming the argument), silently wrong
(no error, or a wrong answer) and hang (over the time limit)."""

from __future__ import annotations

import functools
import signal
import sys

import pytest
import torch
from torch import nn

TIME_LIMIT = 20  # seconds: a case over it hangs

CASES: list[tuple[str, str, str, str | None, callable]] = []  # (id, expect, kind, name, fn)


def refuses(kind: str, name: str):
    """A case that must raise ValueError/TypeError naming ``name``."""
    def register(fn):
        CASES.append((fn.__name__, "refuse", kind, name, fn))
        return fn
    return register


def accepts(kind: str):
    """A case that must run and whose asserts must hold."""
    def register(fn):
        CASES.append((fn.__name__, "accept", kind, None, fn))
        return fn
    return register


# --------------------------------------------------------------------------------------
# Small, untrained things to misuse (built once, on the runtime's device)
# --------------------------------------------------------------------------------------

def dev():
    from course_utils.runtime import get_device
    return get_device()


PAIRS = [("one two three", "eins zwei drei"), ("four five", "vier fuenf"),
         ("six seven eight nine", "sechs sieben acht neun"), ("ten", "zehn")]


@functools.cache
def data():
    from course_utils.data import TranslationData
    return TranslationData.build(PAIRS)


@functools.cache
def batch():
    return data().batches(4, by_length=False)[0].to(dev())


@functools.cache
def seq2seq():
    from course_utils.seq2seq import Seq2Seq, Seq2SeqConfig
    torch.manual_seed(0)
    d = data()
    return Seq2Seq(Seq2SeqConfig(len(d.src_vocab), len(d.tgt_vocab), emb_size=8, hidden_size=8,
                                 attention="additive", attn_size=8)).to(dev())


@functools.cache
def transformer():
    from course_utils.transformer import Transformer, TransformerConfig
    torch.manual_seed(0)
    d = data()
    return Transformer(TransformerConfig(len(d.src_vocab), len(d.tgt_vocab), d_model=8, num_heads=2,
                                         num_encoder_layers=1, num_decoder_layers=1, d_ff=16)).to(dev())


@functools.cache
def convs2s():
    from course_utils.convs2s import ConvS2S, ConvS2SConfig
    torch.manual_seed(0)
    d = data()
    return ConvS2S(ConvS2SConfig(len(d.src_vocab), len(d.tgt_vocab), emb_size=8, hidden_size=8,
                                 encoder_layers=1, decoder_layers=1)).to(dev())


@functools.cache
def gpt():
    from course_utils.gpt import GPT, GPTConfig
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=20, max_len=8, d_model=8, num_heads=2, num_layers=1, d_ff=16)).to(dev())


@functools.cache
def bert():
    from course_utils.bert import BertConfig, BertForPreTraining
    torch.manual_seed(0)
    return BertForPreTraining(BertConfig(vocab_size=20, d_model=8, num_layers=1, num_heads=2, d_ff=16,
                                         max_len=8)).to(dev())


@functools.cache
def vit():
    from course_utils.vit import ViT, ViTConfig
    torch.manual_seed(0)
    return ViT(ViTConfig(image_size=4, patch_size=2, d_model=8, num_heads=2, num_layers=1, d_ff=16)).to(dev())


def ids(*shape, high=5, dtype=torch.long):
    return torch.randint(4, high + 4, shape, device=dev()).to(dtype)


def loss_of(model):
    def loss_fn(m, b):
        return sum(p.sum() for p in m.parameters()) * 0.0 + next(m.parameters()).square().mean()
    return loss_fn


# --------------------------------------------------------------------------------------
# attention: masks, masked softmax, score functions, multi-head attention
# --------------------------------------------------------------------------------------

@refuses("value", "n")
def causal_mask_zero():
    from course_utils.attention import causal_mask
    causal_mask(0)


@refuses("type", "lengths")
def padding_mask_float_lengths():
    from course_utils.attention import padding_mask
    padding_mask(torch.tensor([2.5, 1.0]))


@refuses("rank", "lengths")
def padding_mask_2d_lengths():
    from course_utils.attention import padding_mask
    padding_mask(torch.tensor([[2, 1]]))


@accepts("type")
def padding_mask_list_lengths():
    from course_utils.attention import padding_mask
    assert padding_mask([2, 1]).tolist() == [[True, True], [True, False]]


@refuses("value", "lengths")
def padding_mask_negative_length():
    from course_utils.attention import padding_mask
    padding_mask(torch.tensor([2, -1]))


@refuses("dtype", "scores")
def masked_softmax_long_scores():
    from course_utils.attention import masked_softmax
    masked_softmax(torch.arange(6).view(2, 3))


@refuses("dtype", "mask")
def masked_softmax_int_mask():
    from course_utils.attention import masked_softmax
    masked_softmax(torch.randn(2, 3), torch.ones(2, 3, dtype=torch.long))


@refuses("size", "mask")
def masked_softmax_mask_wrong_size():
    from course_utils.attention import masked_softmax
    masked_softmax(torch.randn(2, 3), torch.ones(2, 4, dtype=torch.bool))


@refuses("type", "scores")
def masked_softmax_list():
    from course_utils.attention import masked_softmax
    masked_softmax([[1.0, 2.0]])


@accepts("trap")
def masked_softmax_fully_masked_row_no_nan():
    from course_utils.attention import masked_softmax
    mask = torch.tensor([[True, False], [False, False]])
    w = masked_softmax(torch.randn(2, 2), mask)
    assert not w.isnan().any() and w[1].eq(0).all()


@accepts("trap")
def masked_softmax_minus_inf_row_no_nan():
    from course_utils.attention import masked_softmax
    scores = torch.tensor([[0.0, 1.0], [float("-inf"), float("-inf")]])
    w = masked_softmax(scores, torch.ones(2, 2, dtype=torch.bool))
    assert not w.isnan().any()


@accepts("trap")
def masked_softmax_minus_inf_row_no_mask_no_nan():
    from course_utils.attention import masked_softmax
    w = masked_softmax(torch.full((1, 3), float("-inf")))
    assert not w.isnan().any()


@refuses("dtype", "q")
def sdpa_long_q():
    from course_utils.attention import scaled_dot_product_attention
    x = torch.arange(6).view(1, 2, 3)
    scaled_dot_product_attention(x, x, x)


@refuses("size", "k")
def sdpa_d_k_mismatch():
    from course_utils.attention import scaled_dot_product_attention
    scaled_dot_product_attention(torch.randn(1, 2, 3), torch.randn(1, 2, 4), torch.randn(1, 2, 4))


@refuses("rank", "q")
def sdpa_1d():
    from course_utils.attention import scaled_dot_product_attention
    scaled_dot_product_attention(torch.randn(3), torch.randn(3), torch.randn(3))


@refuses("dtype", "mask")
def sdpa_float_mask():
    from course_utils.attention import scaled_dot_product_attention
    x = torch.randn(1, 2, 4)
    scaled_dot_product_attention(x, x, x, torch.ones(2, 2))


@refuses("value", "num_heads")
def mha_zero_heads():
    from course_utils.attention import MultiHeadAttention
    MultiHeadAttention(8, 0)


@refuses("value", "num_heads")
def mha_heads_do_not_divide():
    from course_utils.attention import MultiHeadAttention
    MultiHeadAttention(8, 3)


@refuses("size", "key")
def mha_key_width():
    from course_utils.attention import MultiHeadAttention
    MultiHeadAttention(8, 2)(torch.randn(1, 3, 8), torch.randn(1, 3, 6), torch.randn(1, 3, 6))


@refuses("size", "value")
def mha_value_length():
    from course_utils.attention import MultiHeadAttention
    MultiHeadAttention(8, 2)(torch.randn(1, 3, 8), torch.randn(1, 4, 8), torch.randn(1, 5, 8))


@refuses("size", "key")
def mha_batch_mismatch():
    from course_utils.attention import MultiHeadAttention
    MultiHeadAttention(8, 2)(torch.randn(2, 3, 8), torch.randn(3, 3, 8), torch.randn(3, 3, 8))


@refuses("dtype", "query")
def mha_long_query():
    from course_utils.attention import MultiHeadAttention
    x = torch.arange(24).view(1, 3, 8)
    MultiHeadAttention(8, 2)(x, x, x)


@refuses("dtype", "mask")
def mha_long_mask():
    from course_utils.attention import MultiHeadAttention
    x = torch.randn(1, 3, 8)
    MultiHeadAttention(8, 2)(x, x, x, torch.ones(3, 3, dtype=torch.long))


@refuses("size", "mask")
def mha_mask_wrong_keys():
    from course_utils.attention import MultiHeadAttention
    x = torch.randn(1, 3, 8)
    MultiHeadAttention(8, 2)(x, x, x, torch.ones(3, 5, dtype=torch.bool))


@refuses("rank", "keys")
def score_attention_2d_keys():
    from course_utils.attention import AdditiveAttention
    AdditiveAttention(4, 4, 4)(torch.randn(2, 4), torch.randn(2, 4))


@refuses("size", "keys")
def score_attention_key_width():
    from course_utils.attention import AdditiveAttention
    AdditiveAttention(4, 4, 4)(torch.randn(2, 4), torch.randn(2, 3, 5))


@refuses("size", "query")
def score_attention_query_width():
    from course_utils.attention import MultiplicativeAttention
    MultiplicativeAttention(4, 4)(torch.randn(2, 3), torch.randn(2, 3, 4))


@refuses("size", "mask")
def score_attention_mask_length():
    from course_utils.attention import DotAttention
    DotAttention()(torch.randn(2, 4), torch.randn(2, 3, 4), mask=torch.ones(2, 5, dtype=torch.bool))


@refuses("dtype", "mask")
def score_attention_float_mask():
    from course_utils.attention import MLPAttention
    MLPAttention(4, 4, 4)(torch.randn(2, 4), torch.randn(2, 3, 4), mask=torch.ones(2, 3))


@refuses("size", "keys")
def score_attention_batch_mismatch():
    from course_utils.attention import DotAttention
    DotAttention()(torch.randn(2, 4), torch.randn(3, 3, 4))


@refuses("value", "kind")
def make_attention_unknown():
    from course_utils.attention import make_attention
    make_attention("cosine", 4, 4)


@refuses("value", "hidden_size")
def make_attention_zero_hidden():
    from course_utils.attention import make_attention
    make_attention("additive", 4, 4, 0)


# --------------------------------------------------------------------------------------
# positional encodings and norms
# --------------------------------------------------------------------------------------

@refuses("value", "d_model")
def sinusoidal_odd_width():
    from course_utils.positional import sinusoidal_encoding
    sinusoidal_encoding(4, 5)


@refuses("value", "max_len")
def sinusoidal_zero_len():
    from course_utils.positional import sinusoidal_encoding
    sinusoidal_encoding(0, 4)


@refuses("type", "max_len")
def sinusoidal_float_len():
    from course_utils.positional import sinusoidal_encoding
    sinusoidal_encoding(4.0, 4)


@refuses("type", "k")
def shift_matrix_float_k():
    from course_utils.positional import shift_matrix
    shift_matrix(1.5, 4)


@refuses("rank", "pe")
def position_similarity_1d():
    from course_utils.positional import position_similarity
    position_similarity(torch.randn(4))


@refuses("dtype", "pe")
def position_similarity_long():
    from course_utils.positional import position_similarity
    position_similarity(torch.arange(8).view(2, 4))


@refuses("type", "pe")
def position_similarity_list():
    from course_utils.positional import position_similarity
    position_similarity([[1.0, 0.0]])


@refuses("dtype", "x")
def layer_norm_long():
    from course_utils.norms import layer_norm
    layer_norm(torch.arange(6).view(2, 3))


@refuses("rank", "x")
def layer_norm_scalar():
    from course_utils.norms import layer_norm
    layer_norm(torch.tensor(1.0))


@refuses("size", "weight")
def layer_norm_weight_size():
    from course_utils.norms import layer_norm
    layer_norm(torch.randn(2, 3), weight=torch.ones(4))


@refuses("type", "x")
def layer_norm_list():
    from course_utils.norms import layer_norm
    layer_norm([[1.0, 2.0]])


@refuses("dtype", "x")
def batch_norm_long():
    from course_utils.norms import batch_norm
    batch_norm(torch.arange(6).view(2, 3))


@refuses("rank", "x")
def batch_norm_1d():
    from course_utils.norms import batch_norm
    batch_norm(torch.randn(4))


@refuses("size", "mask")
def batch_statistics_mask_shape():
    from course_utils.norms import batch_statistics
    batch_statistics(torch.randn(2, 3, 4), torch.ones(2, 4, dtype=torch.bool))


@refuses("dtype", "x")
def batch_statistics_long():
    from course_utils.norms import batch_statistics
    batch_statistics(torch.arange(6).view(2, 3))


# --------------------------------------------------------------------------------------
# configs: sizes positive, heads dividing the width, vocabularies non-empty
# --------------------------------------------------------------------------------------

@refuses("value", "num_heads")
def transformer_config_zero_heads():
    from course_utils.transformer import TransformerConfig
    TransformerConfig(10, 10, num_heads=0)


@refuses("value", "num_heads")
def transformer_config_heads_divide():
    from course_utils.transformer import TransformerConfig
    TransformerConfig(10, 10, d_model=10, num_heads=4)


@refuses("value", "src_vocab_size")
def transformer_config_empty_vocab():
    from course_utils.transformer import TransformerConfig
    TransformerConfig(0, 10)


@refuses("value", "d_ff")
def transformer_config_negative_ff():
    from course_utils.transformer import TransformerConfig
    TransformerConfig(10, 10, d_ff=-1)


@refuses("value", "dropout")
def transformer_config_dropout():
    from course_utils.transformer import TransformerConfig
    TransformerConfig(10, 10, dropout=1.5)


@refuses("value", "tgt_vocab_size")
def seq2seq_config_empty_vocab():
    from course_utils.seq2seq import Seq2SeqConfig
    Seq2SeqConfig(10, 0)


@refuses("value", "hidden_size")
def seq2seq_config_zero_hidden():
    from course_utils.seq2seq import Seq2SeqConfig
    Seq2SeqConfig(10, 10, hidden_size=0)


@refuses("type", "emb_size")
def seq2seq_config_float_size():
    from course_utils.seq2seq import Seq2SeqConfig
    Seq2SeqConfig(10, 10, emb_size=8.0)


@refuses("value", "src_vocab_size")
def convs2s_config_empty_vocab():
    from course_utils.convs2s import ConvS2SConfig
    ConvS2SConfig(0, 10)


@refuses("value", "num_heads")
def gpt_config_zero_heads():
    from course_utils.gpt import GPTConfig
    GPTConfig(vocab_size=10, num_heads=0)


@refuses("value", "vocab_size")
def gpt_config_empty_vocab():
    from course_utils.gpt import GPTConfig
    GPTConfig(vocab_size=0)


@refuses("value", "num_heads")
def bert_config_zero_heads():
    from course_utils.bert import BertConfig
    BertConfig(vocab_size=10, num_heads=0)


@refuses("value", "vocab_size")
def bert_config_empty_vocab():
    from course_utils.bert import BertConfig
    BertConfig(vocab_size=0)


@refuses("value", "patch_size")
def vit_config_zero_patch():
    from course_utils.vit import ViTConfig
    ViTConfig(patch_size=0)


@refuses("value", "num_heads")
def vit_config_zero_heads():
    from course_utils.vit import ViTConfig
    ViTConfig(num_heads=0)


@refuses("value", "num_classes")
def vit_config_no_classes():
    from course_utils.vit import ViTConfig
    ViTConfig(num_classes=0)


@refuses("value", "image_size")
def vit_config_patch_does_not_divide():
    from course_utils.vit import ViTConfig
    ViTConfig(image_size=8, patch_size=3)


# --------------------------------------------------------------------------------------
# forward passes of the models
# --------------------------------------------------------------------------------------

@refuses("dtype", "src")
def transformer_float_src():
    b = batch()
    transformer()(b.src.float(), b.src_lengths, b.tgt[:, :-1])


@refuses("size", "src_lengths")
def transformer_lengths_batch():
    b = batch()
    transformer()(b.src, b.src_lengths[:2], b.tgt[:, :-1])


@refuses("dtype", "tgt_in")
def transformer_float_tgt():
    b = batch()
    transformer()(b.src, b.src_lengths, b.tgt[:, :-1].float())


@refuses("size", "tgt_in")
def transformer_tgt_batch():
    b = batch()
    transformer()(b.src, b.src_lengths, b.tgt[:2, :-1])


@refuses("value", "src")
def transformer_id_out_of_vocab():
    b = batch()
    if dev().type != "cpu":
        pytest.skip("ids are read (a sync) on the CPU only")
    transformer()(b.src + 1000, b.src_lengths, b.tgt[:, :-1])


@accepts("type")
def transformer_list_lengths():
    b = batch()
    out = transformer()(b.src, b.src_lengths.tolist(), b.tgt[:, :-1])
    assert out.shape[:2] == b.tgt[:, :-1].shape


@refuses("dtype", "src")
def seq2seq_float_src():
    b = batch()
    seq2seq()(b.src.float(), b.src_lengths, b.tgt[:, :-1])


@accepts("type")
def seq2seq_list_lengths():
    b = batch()
    logits, _ = seq2seq()(b.src, b.src_lengths.tolist(), b.tgt[:, :-1])
    assert logits.shape[:2] == b.tgt[:, :-1].shape


@refuses("size", "src_lengths")
def seq2seq_lengths_batch():
    b = batch()
    seq2seq()(b.src, b.src_lengths[:3], b.tgt[:, :-1])


@refuses("value", "src_lengths")
def seq2seq_length_too_long():
    b = batch()
    seq2seq()(b.src, b.src_lengths + 5, b.tgt[:, :-1])


@refuses("rank", "tgt_in")
def seq2seq_1d_tgt():
    b = batch()
    seq2seq()(b.src, b.src_lengths, b.tgt[:, 0])


@refuses("dtype", "src")
def convs2s_float_src():
    b = batch()
    convs2s()(b.src.float(), b.src_lengths, b.tgt[:, :-1])


@refuses("rank", "src")
def convs2s_1d_src():
    b = batch()
    convs2s()(b.src[0], b.src_lengths, b.tgt[:, :-1])


@refuses("dtype", "idx")
def gpt_float_ids():
    gpt()(ids(2, 4).float())


@refuses("rank", "idx")
def gpt_1d_ids():
    gpt()(ids(4))


@refuses("type", "idx")
def gpt_list_ids():
    gpt()([[1, 2, 3]])


@refuses("size", "idx")
def gpt_too_long():
    gpt()(ids(1, 9))


@refuses("dtype", "input_ids")
def bert_float_ids():
    bert()(ids(2, 4).float())


@refuses("size", "attention_mask")
def bert_mask_shape():
    bert()(ids(2, 4), attention_mask=torch.ones(2, 5, dtype=torch.long, device=dev()))


@refuses("size", "input_ids")
def bert_too_long():
    bert()(ids(1, 9))


@refuses("dtype", "images")
def vit_long_images():
    vit()(torch.ones(2, 1, 4, 4, dtype=torch.long, device=dev()))


@refuses("size", "images")
def vit_wrong_image_size():
    vit()(torch.randn(2, 1, 8, 8, device=dev()))


@refuses("rank", "images")
def vit_3d_images():
    vit()(torch.randn(1, 4, 4, device=dev()))


@refuses("value", "patch_size")
def patchify_zero_patch():
    from course_utils.vit import patchify
    patchify(torch.randn(1, 1, 4, 4), 0)


@refuses("type", "images")
def patchify_list():
    from course_utils.vit import patchify
    patchify([[1.0]], 2)


@refuses("value", "patch_size")
def unpatchify_zero_patch():
    from course_utils.vit import unpatchify
    unpatchify(torch.randn(1, 4, 4), 0, 4, 4)


@refuses("value", "weights")
def rollout_empty():
    from course_utils.vit import attention_rollout
    attention_rollout([])


@refuses("size", "weights")
def rollout_not_square():
    from course_utils.vit import attention_rollout
    attention_rollout([torch.rand(1, 2, 3, 4)])


# --------------------------------------------------------------------------------------
# decoding and translation
# --------------------------------------------------------------------------------------

@refuses("dtype", "src")
def greedy_float_src():
    from course_utils.decoding import greedy_decode
    b = batch()
    greedy_decode(seq2seq(), b.src.float(), b.src_lengths)


@accepts("type")
def greedy_list_lengths():
    from course_utils.decoding import greedy_decode
    b = batch()
    out = greedy_decode(seq2seq(), b.src, b.src_lengths.tolist(), max_len=3)
    assert len(out.tokens) == len(b.src)


@refuses("size", "src_lengths")
def greedy_lengths_batch():
    from course_utils.decoding import greedy_decode
    b = batch()
    greedy_decode(seq2seq(), b.src, b.src_lengths[:2])


@refuses("value", "max_len")
def greedy_zero_max_len():
    from course_utils.decoding import greedy_decode
    b = batch()
    greedy_decode(seq2seq(), b.src, b.src_lengths, max_len=0)


@refuses("value", "beam_size")
def beam_zero():
    from course_utils.decoding import beam_search
    b = batch()
    beam_search(transformer(), b.src, b.src_lengths, beam_size=0)


@refuses("value", "temperature")
def sample_zero_temperature():
    from course_utils.decoding import sample_decode
    b = batch()
    sample_decode(seq2seq(), b.src, b.src_lengths, temperature=0)


@refuses("type", "tokens")
def sequence_log_prob_tensor_tokens():
    from course_utils.decoding import sequence_log_prob
    b = batch()
    sequence_log_prob(seq2seq(), b.src, b.src_lengths, "eins zwei")


@refuses("size", "tokens")
def sequence_log_prob_count():
    from course_utils.decoding import sequence_log_prob
    b = batch()
    sequence_log_prob(seq2seq(), b.src, b.src_lengths, [[4, 2]])


@refuses("type", "pairs_or_sources")
def translate_string():
    from course_utils.decoding import translate
    translate(seq2seq(), data(), "one two")


@refuses("size", "data")
def translate_vocab_mismatch():
    from course_utils.data import TranslationData
    from course_utils.decoding import translate
    other = TranslationData.build(PAIRS + [("a b c d e f g", "h i j k l m n")])
    translate(seq2seq(), other, ["one two"])


@refuses("value", "method")
def translate_unknown_method():
    from course_utils.decoding import translate
    translate(seq2seq(), data(), ["one"], method="sampling")


@refuses("type", "pairs")
def score_translations_string():
    from course_utils.decoding import score_translations
    score_translations(seq2seq(), data(), "one two")


@refuses("size", "data")
def score_translations_vocab_mismatch():
    from course_utils.data import TranslationData
    from course_utils.decoding import score_translations
    other = TranslationData.build(PAIRS[:2])
    score_translations(transformer(), other, PAIRS[:1])


@refuses("value", "max_new_tokens")
def generate_negative():
    from course_utils.gpt import generate
    generate(gpt(), ids(1, 2), -1)


@refuses("dtype", "idx")
def generate_float_ids():
    from course_utils.gpt import generate
    generate(gpt(), ids(1, 2).float(), 2)


@refuses("value", "top_p")
def generate_top_p():
    from course_utils.gpt import generate
    generate(gpt(), ids(1, 2), 2, top_p=1.5)


@refuses("dtype", "logits")
def next_token_long_logits():
    from course_utils.gpt import next_token
    next_token(torch.arange(6).view(2, 3))


# --------------------------------------------------------------------------------------
# metrics: BLEU against sacrebleu
# --------------------------------------------------------------------------------------

@accepts("trap")
def bleu_sacrebleu_layout_multiple_references():
    import sacrebleu
    from course_utils.metrics import bleu
    hyps = ["the cat sat on the mat", "a dog runs in the park today"]
    refs = [["the cat sat on the mat", "a dog ran in a park today"],      # stream 1
            ["there is a cat on the mat", "a dog runs in the park today"]]  # stream 2
    expected = sacrebleu.corpus_bleu(hyps, refs, force=True).score
    assert bleu(hyps, refs) == pytest.approx(expected)
    assert bleu(hyps, refs) == pytest.approx(100.0)


@accepts("trap")
def bleu_one_stream_as_sacrebleu():
    import sacrebleu
    from course_utils.metrics import bleu
    hyps = ["the cat sat on the mat"]
    refs = [["the cat sat on a mat"]]
    assert bleu(hyps, refs) == pytest.approx(sacrebleu.corpus_bleu(hyps, refs, force=True).score)


@accepts("type")
def bleu_flat_references_still_work():
    import sacrebleu
    from course_utils.metrics import bleu
    hyps = ["the cat sat on the mat", "a dog runs"]
    refs = ["the cat sat on a mat", "a dog runs"]
    assert bleu(hyps, refs) == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs], force=True).score)


@accepts("trap")
def bleu_two_streams_of_one_word():
    """One hypothesis, references [["yes"], ["no"]]: two lists for one hypothesis can only be
    sacrebleu's two reference streams, so BLEU is what sacrebleu gives."""
    import sacrebleu
    from course_utils.metrics import bleu
    assert bleu(["yes"], [["yes"], ["no"]]) == pytest.approx(
        sacrebleu.corpus_bleu(["yes"], [["yes"], ["no"]], force=True).score)


@refuses("value", "references")
def bleu_ambiguous_single_words():
    """Two hypotheses, references [["a", "b"], ["c", "d"]]: two token lists of two words, or two
    streams of two one-word references? Refused: the caller says which with str sentences."""
    from course_utils.metrics import bleu
    bleu(["a b", "c d"], [["a", "b"], ["c", "d"]])


@refuses("size", "references")
def bleu_stream_wrong_length():
    from course_utils.metrics import bleu
    bleu(["a b c", "d e f"], [["a b c", "d e f"], ["a b c"]])


@refuses("type", "hypotheses")
def bleu_string_hypotheses():
    from course_utils.metrics import bleu
    bleu("the cat", ["the cat"])


@refuses("size", "references")
def exact_match_lengths():
    from course_utils.metrics import exact_match
    exact_match(["a", "b"], ["a"])


@refuses("value", "hypotheses")
def bleu_empty():
    from course_utils.metrics import bleu
    bleu([], [])


@refuses("size", "src_lengths")
def scores_by_length_lengths():
    from course_utils.metrics import scores_by_length
    scores_by_length([3], ["a b", "c"], ["a b", "c"])


@refuses("type", "hypotheses")
def scores_by_length_string():
    from course_utils.metrics import scores_by_length
    scores_by_length([3], "a b", ["a b"])


# --------------------------------------------------------------------------------------
# data and batches, BPE
# --------------------------------------------------------------------------------------

@refuses("value", "batch_size")
def batches_zero():
    data().batches(0)


@refuses("type", "batch_size")
def batches_float():
    data().batches(2.0)


@refuses("type", "pairs")
def translation_data_string_pairs():
    from course_utils.data import TranslationData
    TranslationData.build("one two")


@refuses("type", "train_pairs")
def translation_data_flat_strings():
    from course_utils.data import TranslationData
    TranslationData.build(["one two", "three four"])


@refuses("type", "ids")
def vocab_decode_float_ids():
    data().tgt_vocab.decode(torch.tensor([4.0, 5.0]))


@refuses("value", "seqs")
def pad_sequences_empty():
    from course_utils.data import pad_sequences
    pad_sequences([])


@refuses("type", "seqs")
def pad_sequences_string():
    from course_utils.data import pad_sequences
    pad_sequences("abc")


@refuses("type", "tokens")
def vocab_encode_ids():
    data().src_vocab.encode([1, 2, 3])


@refuses("type", "texts")
def bpe_train_string():
    from course_utils.bpe import BPETokenizer
    BPETokenizer.train("the cat sat on the mat", 5)


@refuses("value", "num_merges")
def bpe_train_negative():
    from course_utils.bpe import BPETokenizer
    BPETokenizer.train(["the cat"], -1)


@refuses("type", "text")
def bpe_encode_list():
    from course_utils.bpe import BPETokenizer
    BPETokenizer.train(["the cat"], 2).encode(["the", "cat"])


@refuses("type", "ids")
def bpe_decode_string():
    from course_utils.bpe import BPETokenizer
    BPETokenizer.train(["the cat"], 2).decode("12")


@refuses("type", "word_freqs")
def train_bpe_list():
    from course_utils.bpe import train_bpe
    train_bpe(["the", "cat"], 2)


@refuses("type", "pair")
def merge_pair_string():
    from course_utils.bpe import merge_pair
    merge_pair(("a", "b"), "ab")


@refuses("value", "num_merges")
def train_wordpiece_negative():
    from course_utils.bpe import train_wordpiece
    train_wordpiece({"cat": 2}, -2)


# --------------------------------------------------------------------------------------
# training.train and the schedules
# --------------------------------------------------------------------------------------

def _train(model, batches, **kwargs):
    from course_utils.training import train
    opt = kwargs.pop("optimizer", None) or torch.optim.SGD(model.parameters(), lr=0.1)
    return train(model, batches, loss_of(model), opt, progress=False, **kwargs)


@refuses("trap", "optimizer")
def train_stale_optimizer():
    from course_utils.training import train
    old = nn.Linear(2, 2).to(dev())
    new = nn.Linear(2, 2).to(dev())
    opt = torch.optim.SGD(old.parameters(), lr=0.1)
    train(new, [0, 1], loss_of(new), opt, max_steps=2, progress=False)


@refuses("trap", "clip_norm")
def train_negative_clip():
    _train(nn.Linear(2, 2).to(dev()), [0], max_steps=1, clip_norm=-1.0)


@refuses("trap", "clip_norm")
def train_zero_clip():
    _train(nn.Linear(2, 2).to(dev()), [0], max_steps=1, clip_norm=0)


@refuses("trap", "batches")
def train_generator_factory():
    """A function giving a generator that never ends (a plain ``while True: yield``) while
    train waits for epochs to finish: refused up front, since a callable that takes no
    epoch is not the ``epoch -> batches`` train asks for."""
    def forever():
        while True:
            yield 0
    _train(nn.Linear(2, 2).to(dev()), forever, num_epochs=1)


@refuses("trap", "batches")
def train_endless_generator_function_with_epochs():
    """A generator function of the epoch that never ends, with only num_epochs: the first epoch
    never ends either. Refused up front (give max_steps), never a hang."""
    def endless(epoch):
        while True:
            yield 0
    _train(nn.Linear(2, 2).to(dev()), endless, num_epochs=1)


@refuses("type", "batches")
def train_generator_object_with_epochs():
    """A generator is used up by the first epoch: with num_epochs > 1, the second epoch has
    nothing. Refused with the fix (a list, or a function of the epoch)."""
    _train(nn.Linear(2, 2).to(dev()), (b for b in [0, 1]), num_epochs=2)


@refuses("type", "loss_fn")
def train_loss_fn_not_callable():
    from course_utils.training import train
    m = nn.Linear(2, 2).to(dev())
    train(m, [0], 0.5, torch.optim.SGD(m.parameters(), lr=0.1), max_steps=1, progress=False)


@refuses("type", "optimizer")
def train_optimizer_not_an_optimizer():
    from course_utils.training import train
    m = nn.Linear(2, 2).to(dev())
    train(m, [0], loss_of(m), m.parameters(), max_steps=1, progress=False)


@refuses("value", "max_steps")
def train_zero_steps():
    _train(nn.Linear(2, 2).to(dev()), [0], max_steps=0)


@refuses("value", "batches")
def train_empty_batches():
    _train(nn.Linear(2, 2).to(dev()), [], num_epochs=1)


@refuses("type", "batches")
def train_string_batches():
    _train(nn.Linear(2, 2).to(dev()), "abc", num_epochs=1)


@accepts("trap")
def warmup_scheduler_never_negative():
    from course_utils.schedules import warmup_scheduler
    opt = torch.optim.SGD(nn.Linear(2, 2).parameters(), lr=1.0)
    sched = warmup_scheduler(opt, warmup=2, total_steps=5, cooldown=3)
    lrs = []
    for _ in range(10):
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    assert min(lrs) >= 0.0


@refuses("value", "total_steps")
def warmup_scheduler_cooldown_longer_than_total():
    from course_utils.schedules import warmup_scheduler
    warmup_scheduler(torch.optim.SGD(nn.Linear(2, 2).parameters(), lr=1.0), 2, total_steps=5, cooldown=6)


@accepts("trap")
def cosine_schedule_never_negative():
    from course_utils.schedules import cosine_schedule
    opt = torch.optim.SGD(nn.Linear(2, 2).parameters(), lr=1.0)
    sched = cosine_schedule(opt, warmup=1, steps=4)
    lrs = []
    for _ in range(10):
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    assert min(lrs) >= 0.0


@refuses("type", "optimizer")
def warmup_scheduler_not_an_optimizer():
    from course_utils.schedules import warmup_scheduler
    warmup_scheduler(nn.Linear(2, 2).parameters(), 2)


@refuses("type", "warmup")
def warmup_scheduler_float_warmup():
    from course_utils.schedules import warmup_scheduler
    warmup_scheduler(torch.optim.SGD(nn.Linear(2, 2).parameters(), lr=1.0), "4000")


@refuses("value", "d_model")
def noam_zero_width():
    from course_utils.schedules import noam_lr
    noam_lr(1, 0, 10)


@refuses("value", "step")
def noam_step_zero():
    from course_utils.schedules import noam_lr
    noam_lr(0, 8, 10)


# --------------------------------------------------------------------------------------
# figures and explorers: nothing to draw
# --------------------------------------------------------------------------------------

def _closing(fn):
    import matplotlib.pyplot as plt
    try:
        return fn()
    finally:
        plt.close("all")


@refuses("empty", "nothing to draw")
def length_histogram_empty():
    from course_utils.viz import length_histogram
    _closing(lambda: length_histogram({"train": []}))


@refuses("empty", "nothing to draw")
def length_histogram_no_lists():
    from course_utils.viz import length_histogram
    _closing(lambda: length_histogram({}))


@refuses("empty", "nothing to draw")
def plot_history_empty_dict():
    from course_utils.viz import plot_history
    _closing(lambda: plot_history({}))


@refuses("empty", "nothing to draw")
def plot_by_length_empty():
    from course_utils.viz import plot_by_length
    _closing(lambda: plot_by_length({}))


@refuses("empty", "nothing to draw")
def plot_history_no_steps():
    from course_utils.training import History
    from course_utils.viz import plot_history
    _closing(lambda: plot_history(History()))


@refuses("empty", "nothing to draw")
def attention_heatmap_empty():
    from course_utils.viz import attention_heatmap
    _closing(lambda: attention_heatmap(torch.empty(0, 3)))


@refuses("rank", "weights")
def attention_heatmap_3d():
    from course_utils.viz import attention_heatmap
    _closing(lambda: attention_heatmap(torch.rand(2, 3, 3)))


@refuses("size", "x_tokens")
def attention_heatmap_tokens():
    from course_utils.viz import attention_heatmap
    _closing(lambda: attention_heatmap(torch.rand(2, 3), x_tokens=["a", "b"]))


@refuses("type", "x_tokens")
def attention_heatmap_string_tokens():
    from course_utils.viz import attention_heatmap
    _closing(lambda: attention_heatmap(torch.rand(2, 3), x_tokens="abc"))


@refuses("rank", "weights")
def attention_grid_2d():
    from course_utils.viz import attention_grid
    _closing(lambda: attention_grid(torch.rand(3, 3)))


@refuses("empty", "nothing to draw")
def attention_grid_no_layers():
    from course_utils.viz import attention_grid
    _closing(lambda: attention_grid(torch.rand(0, 2, 3, 3)))


@refuses("empty", "nothing to draw")
def beam_tree_empty():
    from course_utils.viz import beam_tree
    _closing(lambda: beam_tree([], {}))


@refuses("empty", "nothing to draw")
def attention_stepper_empty():
    from course_utils.translation_widgets import attention_stepper
    attention_stepper([])


@refuses("empty", "nothing to draw")
def layer_attention_empty():
    from course_utils.translation_widgets import layer_attention
    layer_attention([])


@refuses("empty", "nothing to draw")
def dataset_browser_empty():
    from course_utils.translation_widgets import dataset_browser
    dataset_browser({})


@refuses("empty", "nothing to draw")
def dataset_browser_empty_corpus():
    from course_utils.translation_widgets import dataset_browser
    dataset_browser({"train": []})


@refuses("empty", "nothing to draw")
def vit_attention_empty():
    from course_utils.pretraining_widgets import vit_attention
    vit_attention(vit(), torch.empty(0, 1, 4, 4), torch.empty(0, dtype=torch.long))


@refuses("size", "labels")
def vit_attention_labels():
    from course_utils.pretraining_widgets import vit_attention
    vit_attention(vit(), torch.rand(2, 1, 4, 4), torch.zeros(3, dtype=torch.long))


@refuses("size", "weights")
def walkthrough_shape():
    from course_utils.translation_widgets import Walkthrough
    Walkthrough(["a", "b"], ["x"], torch.rand(2, 2))


# --------------------------------------------------------------------------------------
# Running the cases
# --------------------------------------------------------------------------------------

class _Timeout(BaseException):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def outcome(expect, name, fn) -> tuple[str, str]:
    """('clear' | 'accepted' | 'cryptic' | 'silently wrong' | 'hang', what happened)."""
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIME_LIMIT)
    try:
        fn()
    except _Timeout:
        return "hang", f"over {TIME_LIMIT} s"
    except (ValueError, TypeError) as e:
        text = f"{type(e).__name__}: {e}"
        if expect == "refuse" and name.lower() in str(e).lower():
            return "clear", text
        return "cryptic", text
    except AssertionError as e:
        return "silently wrong", f"AssertionError: {e}"
    except Exception as e:  # noqa: BLE001 - any other error is what this sweep counts
        return "cryptic", f"{type(e).__name__}: {e}"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return ("accepted", "ran") if expect == "accept" else ("silently wrong", "no error")


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_gets_a_clear_error(case):
    _, expect, _, name, fn = case
    result, what = outcome(expect, name, fn)
    assert result == ("accepted" if expect == "accept" else "clear"), what


def test_the_sweep_covers_every_kind():
    kinds = {c[2] for c in CASES}
    assert {"rank", "dtype", "size", "type", "value", "empty", "trap"} <= kinds
    assert len(CASES) >= 150


if __name__ == "__main__":
    import collections
    import warnings
    warnings.simplefilter("ignore")
    import matplotlib
    matplotlib.use("Agg")
    counts = collections.Counter()
    for cid, expect, kind, name, fn in CASES:
        result, what = outcome(expect, name, fn)
        counts[result] += 1
        if "-v" in sys.argv or result not in ("clear", "accepted"):
            print(f"{result:15s} {kind:6s} {cid}: {what[:160]}")
    print(dict(counts), "of", len(CASES))
