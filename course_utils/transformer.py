"""The Transformer encoder-decoder (Vaswani et al., 2017), small enough to read top to bottom.

Taught in: 04_transformer. Built from ``course_utils.attention.MultiHeadAttention``,
``course_utils.positional`` and ``course_utils.norms``.
Leaves out: shared source/target embeddings, relative positions, mixed precision,
caching projected keys and values (``decode_step`` keeps each decoder layer's inputs and
projects them again: simpler, and cheap at these sizes).

The model offers the decoding interface of ``course_utils.decoding``::

    memory, state = model.encode(src, src_lengths)    # memory: encoder states + source mask
    log_probs, state, weights = model.decode_step(prev_tokens, state, memory)

where ``state`` holds the tokens fed so far (batch, t) and each decoder layer's inputs at
those positions (batch, t, d), and ``weights`` (batch, src_len) are the last layer's
cross-attention, averaged over heads, for the newest word.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from course_utils.attention import MultiHeadAttention, causal_mask, padding_mask
from course_utils.checks import check_config, check_ids
from course_utils.data.vocab import PAD_ID, check_src_batch
from course_utils.norms import make_norm
from course_utils.positional import make_positional
from course_utils.seq2seq import next_word_loss


@dataclass
class TransformerConfig:
    """Sizes and choices of an encoder-decoder Transformer."""
    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 128          # width of every token vector
    num_heads: int = 4          # d_model / num_heads = d_k per head
    num_encoder_layers: int = 2
    num_decoder_layers: int = 2
    d_ff: int = 256             # hidden size of the position-wise feed-forward net
    dropout: float = 0.1
    norm_first: bool = True     # pre-LN (True) or post-LN as in the paper (False)
    norm: str = "layer"         # 'layer' or 'batch' (the comparison in 04)
    decoder_norm: str | None = None  # the decoder's norm if not ``norm`` ('layer' with norm='batch':
                                     # BatchNorm in a causal decoder leaks later words in training)
    positional: str = "sinusoidal"  # 'sinusoidal', 'learned' or 'none'
    max_len: int = 256          # longest sequence the positional table covers

    def __post_init__(self):
        check_config(self, positive=("src_vocab_size", "tgt_vocab_size", "d_model", "num_heads",
                                     "num_encoder_layers", "num_decoder_layers", "d_ff", "max_len"),
                     divides=[("d_model", "num_heads")], fractions=("dropout",))
        if self.norm not in ("layer", "batch"):
            raise ValueError(f"norm must be 'layer' or 'batch', got {self.norm!r}")
        if self.decoder_norm not in (None, "layer", "batch"):
            raise ValueError(f"decoder_norm must be 'layer' or 'batch' (or None: as norm), got {self.decoder_norm!r}")
        if self.positional not in ("sinusoidal", "learned", "none"):
            raise ValueError(f"positional must be 'sinusoidal', 'learned' or 'none', got {self.positional!r}")


# --------------------------------------------------------------------------------------
# Layers
# --------------------------------------------------------------------------------------


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = W2 relu(W1 x + b1) + b2, the same two-layer net at every position.
    (batch, n, d_model) -> (batch, n, d_model). Taught in: 04_transformer."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.linear2(self.dropout(torch.relu(self.linear1(x))))


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each wrapped in a residual connection and a norm.

    post-LN (paper): x = norm(x + sublayer(x)); pre-LN: x = x + sublayer(norm(x)).
    ``forward(x (batch, n, d), mask)`` with mask (batch, 1, n) or (n, n) bool (True = may
    attend) returns ``(x, weights (batch, heads, n, n))``; ``need_weights=False`` gives
    None for the weights and takes the fused attention kernel (training). With ``cache``
    (a ``KVCache``: GPT's generation, 07) ``x`` holds only the new positions, which attend
    over the cached ones too (the mask then has a column for each). Taught in:
    04_transformer.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0,
                 norm_first: bool = True, norm: str = "layer"):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ff = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = make_norm(norm, d_model), make_norm(norm, d_model)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x, mask=None, need_weights: bool = True, cache=None):
        if self.norm_first:
            h = self.norm1(x)
            a, weights = self.self_attn(h, h, h, mask, need_weights, cache=cache)
            x = x + self.dropout(a)                            # 1. attention + residual
            x = x + self.dropout(self.ff(self.norm2(x)))       # 2. feed-forward + residual
        else:
            a, weights = self.self_attn(x, x, x, mask, need_weights, cache=cache)
            x = self.norm1(x + self.dropout(a))
            x = self.norm2(x + self.dropout(self.ff(x)))
        return x, weights

    @torch.no_grad()
    def copy_from_torch(self, layer: nn.TransformerEncoderLayer) -> "EncoderLayer":
        """Copy the weights of a ``torch.nn.TransformerEncoderLayer`` (batch_first, relu)."""
        if layer.norm_first != self.norm_first:
            raise ValueError(f"torch layer has norm_first={layer.norm_first}, this one {self.norm_first}")
        self.self_attn.copy_from_torch(layer.self_attn)
        _copy_ff_and_norms(self, layer, 2)
        return self


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention (queries from the decoder, keys and values
    from the encoder), feed-forward; each with a residual connection and a norm.

    ``forward(y (batch, t, d), memory (batch, s, d), self_mask, memory_mask)`` returns
    ``(y, self_weights (batch, heads, t, t), cross_weights (batch, heads, t, s))``. With
    ``seen`` (batch, t', d), the layer inputs of every position so far (the last t are
    ``y``), self-attention reads keys and values from ``seen``: one-step decoding.
    ``need_weights=False``: both weights are None (fused attention kernel, for training).
    Taught in: 04_transformer.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0,
                 norm_first: bool = True, norm: str = "layer"):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ff = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = (make_norm(norm, d_model) for _ in range(3))
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, y, memory, self_mask=None, memory_mask=None, seen=None, need_weights: bool = True):
        if self.norm_first:
            h = self.norm1(y)
            hs = h if seen is None else self.norm1(seen)
            a, self_w = self.self_attn(h, hs, hs, self_mask, need_weights)
            y = y + self.dropout(a)                            # 1. masked self-attention
            a, cross_w = self.cross_attn(self.norm2(y), memory, memory, memory_mask, need_weights)
            y = y + self.dropout(a)                            # 2. cross-attention
            y = y + self.dropout(self.ff(self.norm3(y)))       # 3. feed-forward
        else:
            seen = y if seen is None else seen
            a, self_w = self.self_attn(y, seen, seen, self_mask, need_weights)
            y = self.norm1(y + self.dropout(a))
            a, cross_w = self.cross_attn(y, memory, memory, memory_mask, need_weights)
            y = self.norm2(y + self.dropout(a))
            y = self.norm3(y + self.dropout(self.ff(y)))
        return y, self_w, cross_w

    @torch.no_grad()
    def copy_from_torch(self, layer: nn.TransformerDecoderLayer) -> "DecoderLayer":
        """Copy the weights of a ``torch.nn.TransformerDecoderLayer`` (batch_first, relu)."""
        if layer.norm_first != self.norm_first:
            raise ValueError(f"torch layer has norm_first={layer.norm_first}, this one {self.norm_first}")
        self.self_attn.copy_from_torch(layer.self_attn)
        self.cross_attn.copy_from_torch(layer.multihead_attn)
        _copy_ff_and_norms(self, layer, 3)
        return self


def _copy_ff_and_norms(ours, theirs, num_norms):
    if not all(isinstance(getattr(ours, f"norm{i}"), nn.LayerNorm) for i in range(1, num_norms + 1)):
        raise ValueError("only LayerNorm layers can be copied from torch")
    ours.ff.linear1.load_state_dict(theirs.linear1.state_dict())
    ours.ff.linear2.load_state_dict(theirs.linear2.state_dict())
    for i in range(1, num_norms + 1):
        getattr(ours, f"norm{i}").load_state_dict(getattr(theirs, f"norm{i}").state_dict())


# --------------------------------------------------------------------------------------
# The encoder-decoder
# --------------------------------------------------------------------------------------


class Transformer(nn.Module):
    """Encoder-decoder Transformer with the decoding interface of ``course_utils.decoding``.

    ``forward(src (batch, s), src_lengths (batch,), tgt_in (batch, t))`` returns logits
    (batch, t, tgt_vocab) for teacher-forced training. Taught in: 04_transformer.
    """

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.src_embedding = nn.Embedding(cfg.src_vocab_size, d, padding_idx=PAD_ID)
        self.tgt_embedding = nn.Embedding(cfg.tgt_vocab_size, d, padding_idx=PAD_ID)
        self.src_position = make_positional(cfg.positional, d, cfg.max_len)
        self.tgt_position = make_positional(cfg.positional, d, cfg.max_len)
        decoder_norm = cfg.norm if cfg.decoder_norm is None else cfg.decoder_norm
        layer_args = (d, cfg.num_heads, cfg.d_ff, cfg.dropout, cfg.norm_first)
        self.encoder_layers = nn.ModuleList(EncoderLayer(*layer_args, cfg.norm)
                                            for _ in range(cfg.num_encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(*layer_args, decoder_norm)
                                            for _ in range(cfg.num_decoder_layers))
        # pre-LN leaves the residual stream un-normalised: one final norm on each side
        self.encoder_norm = make_norm(cfg.norm, d) if cfg.norm_first else nn.Identity()
        self.decoder_norm = make_norm(decoder_norm, d) if cfg.norm_first else nn.Identity()
        self.generator = nn.Linear(d, cfg.tgt_vocab_size)
        self.dropout = nn.Dropout(cfg.dropout)
        for p in self.parameters():  # Xavier for every matrix, as in the reference code
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        for position in (self.src_position, self.tgt_position):  # ...but a learned position table
            if hasattr(position, "reset_parameters"):             # starts at the sinusoids' scale
                position.reset_parameters()                       # (Xavier: ~8x smaller at d=32)
        with torch.no_grad():  # <pad> embeddings stay zero (and get no gradient)
            self.src_embedding.weight[PAD_ID].zero_()
            self.tgt_embedding.weight[PAD_ID].zero_()

    def _embed(self, tokens, table, position, offset=0):
        # scale by sqrt(d) so that the embeddings are not drowned by the positions
        return self.dropout(position(table(tokens) * math.sqrt(self.cfg.d_model), offset))

    def run_encoder(self, src, src_lengths, need_weights: bool = True):
        """Encoder states (batch, s, d), the source mask (batch, s) and every layer's
        self-attention weights (list of (batch, heads, s, s); Nones if not ``need_weights``)."""
        src_lengths = check_src_batch(src, src_lengths, self.cfg.src_vocab_size)
        src_mask = padding_mask(src_lengths, src.shape[1]).to(src.device)  # (batch, s)
        x, weights = self._embed(src, self.src_embedding, self.src_position), []
        for layer in self.encoder_layers:
            x, w = layer(x, src_mask.unsqueeze(1), need_weights)  # (batch, 1, s): same keys for every query
            weights.append(w)
        return self.encoder_norm(x), src_mask, weights

    def run_decoder(self, tgt_in, memory, src_mask, need_weights: bool = True):
        """Decoder states (batch, t, d) for a teacher-forced prefix ``tgt_in`` (batch, t),
        plus lists of self- and cross-attention weights per layer."""
        t = tgt_in.shape[1]
        self_mask = causal_mask(t, device=tgt_in.device)  # (t, t): no peeking at later words
        y, self_ws, cross_ws = self._embed(tgt_in, self.tgt_embedding, self.tgt_position), [], []
        for layer in self.decoder_layers:
            y, sw, cw = layer(y, memory, self_mask, src_mask.unsqueeze(1), need_weights=need_weights)
            self_ws.append(sw)
            cross_ws.append(cw)
        return self.decoder_norm(y), self_ws, cross_ws

    def forward(self, src, src_lengths, tgt_in):
        sizes = {"batch": (src.shape[0], "src")} if torch.is_tensor(src) and src.dim() == 2 else {}
        check_ids("tgt_in", tgt_in, self.cfg.tgt_vocab_size, shape=("batch", "tgt_len"), sizes=sizes)
        # no attention weights are kept: the fused kernel is used (same output, faster)
        memory, src_mask, _ = self.run_encoder(src, src_lengths, need_weights=False)
        y, _, _ = self.run_decoder(tgt_in, memory, src_mask, need_weights=False)
        return self.generator(y)  # (batch, t, tgt_vocab)

    # -- the decoding interface ------------------------------------------------------

    def encode(self, src, src_lengths):
        """``memory`` = {states (batch, s, d), mask (batch, s)}; ``state`` = {tokens: the
        prefix fed so far (batch, 0), layers: per decoder layer its inputs so far (batch, 0, d)}."""
        states, src_mask, _ = self.run_encoder(src, src_lengths, need_weights=False)
        batch, d = src.shape[0], self.cfg.d_model
        state = {"tokens": torch.empty(batch, 0, dtype=torch.long, device=src.device),
                 "layers": [states.new_zeros(batch, 0, d) for _ in self.decoder_layers]}
        return {"states": states, "mask": src_mask}, state

    def decode_step(self, prev_tokens, state, memory):
        """One word: log-probabilities of the next word (batch, vocab), the new state and the
        last layer's cross-attention for this word, mean over heads (batch, s).

        Only the newest position goes through the layers: earlier positions never change
        (they cannot see later ones), so each layer keeps its inputs so far, from which its
        keys and values are projected again at every step (07's key/value cache keeps the
        projections instead). The result equals the teacher-forced pass over the whole prefix."""
        t = state["tokens"].shape[1]
        y = self._embed(prev_tokens.unsqueeze(1), self.tgt_embedding, self.tgt_position, offset=t)
        layers = []
        for layer, past in zip(self.decoder_layers, state["layers"]):
            seen = torch.cat([past, y], dim=1)  # (batch, t + 1, d): this layer's inputs so far
            layers.append(seen)
            y, _, cross_w = layer(y, memory["states"], None, memory["mask"].unsqueeze(1), seen=seen)
        log_probs = torch.log_softmax(self.generator(self.decoder_norm(y[:, -1])), dim=-1)
        state = {"tokens": torch.cat([state["tokens"], prev_tokens.unsqueeze(1)], 1), "layers": layers}
        return log_probs, state, cross_w[:, :, -1].mean(dim=1)

    @torch.no_grad()
    def attention_maps(self, src, src_lengths, tgt_in) -> dict[str, torch.Tensor]:
        """All attention weights for one teacher-forced pass, stacked per kind:
        'encoder' (batch, layers, heads, s, s), 'decoder' (batch, layers, heads, t, t),
        'cross' (batch, layers, heads, t, s). Taught in: 04_transformer."""
        was_training = self.training
        self.eval()
        memory, src_mask, enc_ws = self.run_encoder(src, src_lengths)
        _, self_ws, cross_ws = self.run_decoder(tgt_in, memory, src_mask)
        self.train(was_training)
        return {"encoder": torch.stack(enc_ws, 1), "decoder": torch.stack(self_ws, 1),
                "cross": torch.stack(cross_ws, 1)}


def transformer_loss(model, batch, label_smoothing: float = 0.0) -> torch.Tensor:
    """Mean cross-entropy of the next target word over real positions (teacher forcing).
    Taught in: 04_transformer."""
    logits = model(batch.src, batch.src_lengths, batch.tgt[:, :-1])
    return next_word_loss(logits, batch.tgt, label_smoothing)
