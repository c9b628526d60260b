"""Convolutional sequence to sequence (ConvS2S, Gehring et al. 2017).

Taught in: 03_convs2s (1d convolutions with GLU and residual connections, learned
position embeddings, causal decoder convolutions, attention in every decoder block
with o_i = sum_j alpha_ij (z_j + u_j), parallel training and sequential generation).
Leaves out: weight normalisation and the paper's initialisation of the linear layers, gradient
scaling of the encoder, and fairseq's multi-GPU tricks. Incremental (cached) decoding is a
wrapper, ``IncrementalConvS2S``.

The model offers the decoding interface of ``course_utils.seq2seq``::

    memory, state = model.encode(src, src_lengths)
    log_probs, state, weights = model.decode_step(prev_tokens, state, memory)

Here ``state`` is the prefix of target words fed so far (batch, t): every step runs the
decoder again on the last ``receptive_field`` words of the prefix (all that can reach the
newest output) and keeps the newest position. Training sees all
positions at once; generation must go one word at a time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from course_utils.attention import masked_softmax, padding_mask
from course_utils.checks import check_ids
from course_utils.data.vocab import PAD_ID, check_src_batch


@dataclass
class ConvS2SConfig:
    """Sizes of a ConvS2S encoder-decoder."""
    src_vocab_size: int
    tgt_vocab_size: int
    emb_size: int = 64          # word and position embeddings, and z_j, u_j
    hidden_size: int = 64       # channels of the convolutions
    encoder_layers: int = 3
    decoder_layers: int = 3
    kernel_size: int = 3        # odd: the encoder centres its window on each word
    max_positions: int = 128    # learned position embeddings for positions 0..max-1
    positions: bool = True      # False: no position embeddings (the 03 experiment)
    residual_scale: bool = True  # multiply every residual sum by sqrt(0.5), as the paper does
    dropout: float = 0.0
    emb_std: float = 0.1        # embeddings ~ N(0, emb_std^2) as in the paper (PyTorch's default: 1)

    def __post_init__(self):
        for name in ("src_vocab_size", "tgt_vocab_size", "emb_size", "hidden_size",
                     "encoder_layers", "decoder_layers", "max_positions"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if not isinstance(self.kernel_size, int) or self.kernel_size < 1 or self.kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be a positive odd int, got {self.kernel_size!r}")
        if not self.emb_std > 0:
            raise ValueError(f"emb_std must be a positive number, got {self.emb_std!r}")


def receptive_field(num_layers: int, kernel_size: int) -> int:
    """Number of input positions one output of ``num_layers`` stacked convolutions of width
    ``kernel_size`` sees: 1 + layers * (kernel - 1). Taught in: 03_convs2s."""
    if not isinstance(num_layers, int) or num_layers < 0:
        raise ValueError(f"num_layers must be a non-negative int, got {num_layers!r}")
    if not isinstance(kernel_size, int) or kernel_size < 1:
        raise ValueError(f"kernel_size must be a positive int, got {kernel_size!r}")
    return 1 + num_layers * (kernel_size - 1)


def glu(x: torch.Tensor, dim: int = 1) -> torch.Tensor:
    """Gated linear unit: split ``x`` in halves [a; b] along ``dim``, return a * sigmoid(b).
    (..., 2c, ...) -> (..., c, ...). Taught in: 03_convs2s."""
    if x.shape[dim] % 2:
        raise ValueError(f"glu needs an even size along dim {dim}, got shape {tuple(x.shape)}")
    a, b = x.chunk(2, dim=dim)
    return a * torch.sigmoid(b)


def causal_conv1d(x: torch.Tensor, conv: nn.Conv1d) -> torch.Tensor:
    """Apply ``conv`` to (batch, channels, time) after k-1 zeros on the left only, so output
    t depends on inputs 0..t and never on later ones. Taught in: 03_convs2s."""
    if x.dim() != 3:
        raise ValueError(f"x must be (batch, channels, time), got shape {tuple(x.shape)}")
    k = conv.kernel_size[0]
    return conv(nn.functional.pad(x, (k - 1, 0)))


class ConvS2S(nn.Module):
    """ConvS2S encoder-decoder. Taught in: 03_convs2s.

    Encoder: u_j = word + position embedding; a linear map to ``hidden_size``; per layer
    x <- (GLU(conv(x)) + x) * sqrt(0.5) with padded positions set to zero; a linear map
    back gives z_j. Decoder: g_i = word + position embedding; per layer a causal
    convolution and GLU give h_i, then attention d_i = W h_i + g_i, alpha_ij = softmax_j
    (d_i . z_j) over the real source positions, o_i = sum_j alpha_ij (z_j + u_j), and
    x <- ((h_i + W' o_i) sqrt(0.5) + x) sqrt(0.5). A linear map and the output layer give
    the logits.
    """

    def __init__(self, cfg: ConvS2SConfig):
        super().__init__()
        self.cfg = cfg
        E, H, k = cfg.emb_size, cfg.hidden_size, cfg.kernel_size
        self.scale = math.sqrt(0.5) if cfg.residual_scale else 1.0
        self.src_embedding = nn.Embedding(cfg.src_vocab_size, E, padding_idx=PAD_ID)
        self.tgt_embedding = nn.Embedding(cfg.tgt_vocab_size, E, padding_idx=PAD_ID)
        self.src_position = nn.Embedding(cfg.max_positions, E) if cfg.positions else None
        self.tgt_position = nn.Embedding(cfg.max_positions, E) if cfg.positions else None
        self.enc_in, self.enc_out = nn.Linear(E, H), nn.Linear(H, E)
        self.enc_convs = nn.ModuleList(nn.Conv1d(H, 2 * H, k, padding=k // 2)
                                       for _ in range(cfg.encoder_layers))
        self.dec_in = nn.Linear(E, H)
        self.dec_convs = nn.ModuleList(nn.Conv1d(H, 2 * H, k) for _ in range(cfg.decoder_layers))
        self.att_in = nn.ModuleList(nn.Linear(H, E) for _ in range(cfg.decoder_layers))   # h_i -> d_i
        self.att_out = nn.ModuleList(nn.Linear(E, H) for _ in range(cfg.decoder_layers))  # o_i -> H
        self.dec_out = nn.Linear(H, E)
        self.out = nn.Linear(E, cfg.tgt_vocab_size)
        self.dropout = nn.Dropout(cfg.dropout)
        self.reset_embeddings(cfg.emb_std)

    def reset_embeddings(self, std: float = 0.1) -> None:
        """Draw word and position embeddings from N(0, std^2), as the paper does (PyTorch's
        default N(0, 1) makes the first attention scores d_i . z_j huge and learning slow)."""
        for emb in (self.src_embedding, self.tgt_embedding, self.src_position, self.tgt_position):
            if emb is not None:
                nn.init.normal_(emb.weight, 0.0, std)
                if emb.padding_idx is not None:
                    with torch.no_grad():
                        emb.weight[emb.padding_idx].zero_()

    # -- pieces ---------------------------------------------------------------------

    def _embed(self, tokens, words, positions, offset=0):
        n = tokens.shape[1]
        if offset + n > self.cfg.max_positions:
            raise ValueError(f"sequence of {offset + n} tokens is longer than max_positions="
                             f"{self.cfg.max_positions}")
        x = words(tokens)
        if positions is not None:
            x = x + positions(torch.arange(offset, offset + n, device=tokens.device))
        return self.dropout(x)

    def run_encoder(self, src, src_lengths):
        """z (batch, S, E), z + u (batch, S, E) and the source mask (batch, S), all zero at
        padded positions."""
        src_lengths = check_src_batch(src, src_lengths, self.cfg.src_vocab_size)
        mask = padding_mask(src_lengths, src.shape[1]).to(src.device)  # (batch, S)
        keep = mask.unsqueeze(1).to(torch.get_default_dtype())           # (batch, 1, S)
        u = self._embed(src, self.src_embedding, self.src_position)     # (batch, S, E)
        x = self.enc_in(u).transpose(1, 2) * keep                       # (batch, H, S)
        for conv in self.enc_convs:
            # zero the padding after every layer: nothing leaks into real positions
            x = (glu(conv(self.dropout(x))) + x) * self.scale * keep
        z = self.enc_out(x.transpose(1, 2)) * keep.transpose(1, 2)      # (batch, S, E)
        u = u * keep.transpose(1, 2)
        return z, z + u, mask

    def run_decoder(self, tgt_in, memory, offset: int = 0):
        """Logits (batch, T, V) and attention weights per layer (batch, layers, T, S) for
        every position of ``tgt_in`` at once (causal convolutions: position i sees 0..i).
        ``offset``: position of ``tgt_in``'s first word in the sentence."""
        z, ze, mask = memory["keys"], memory["values"], memory["mask"]
        g = self._embed(tgt_in, self.tgt_embedding, self.tgt_position, offset)  # (batch, T, E)
        x = self.dec_in(g).transpose(1, 2)                              # (batch, H, T)
        weights = []
        for conv, att_in, att_out in zip(self.dec_convs, self.att_in, self.att_out):
            h = glu(causal_conv1d(self.dropout(x), conv)).transpose(1, 2)  # (batch, T, H)
            d = att_in(h) + g                                             # d_i = W h_i + g_i
            alpha = masked_softmax(d @ z.transpose(1, 2), mask.unsqueeze(1))  # (batch, T, S)
            c = alpha @ ze                                                # sum_j alpha_ij (z_j + u_j)
            h = (h + att_out(c)) * self.scale
            x = (h.transpose(1, 2) + x) * self.scale
            weights.append(alpha)
        y = self.dec_out(x.transpose(1, 2))
        return self.out(self.dropout(y)), torch.stack(weights, 1)

    # -- the decoding interface ------------------------------------------------------

    def encode(self, src, src_lengths):
        """``memory`` = {keys z (batch, S, E), values z + u (batch, S, E), mask (batch, S)};
        ``state`` = the empty target prefix (batch, 0)."""
        z, ze, mask = self.run_encoder(src, src_lengths)
        prefix = torch.empty(src.shape[0], 0, dtype=torch.long, device=src.device)
        return {"keys": z, "values": ze, "mask": mask}, prefix

    def decode_step(self, prev_tokens, state, memory):
        """Append ``prev_tokens`` (batch,) to the prefix ``state`` (batch, t), run the decoder
        on the prefix and return log p of the next word (batch, V), the new prefix
        (batch, t + 1) and the last layer's attention of the newest position (batch, S).

        Only the last ``receptive_field(decoder_layers, kernel_size)`` words can reach the
        newest output, so only they are recomputed: the same result, less work."""
        prefix = torch.cat([state, prev_tokens.unsqueeze(1)], dim=1)
        window = receptive_field(self.cfg.decoder_layers, self.cfg.kernel_size)
        start = max(0, prefix.shape[1] - window)
        logits, weights = self.run_decoder(prefix[:, start:], memory, offset=start)
        return torch.log_softmax(logits[:, -1], dim=-1), prefix, weights[:, -1, -1]

    # -- training -------------------------------------------------------------------

    def forward(self, src, src_lengths, tgt_in, teacher_forcing: float = 1.0):
        """Logits (batch, T, V) for every position of ``tgt_in`` and attention weights
        (batch, layers, T, S), all positions in parallel. Only teacher forcing (1.0) is
        supported: that is what makes the training parallel."""
        if teacher_forcing != 1.0:
            raise ValueError(f"ConvS2S trains with teacher forcing 1.0 only, got {teacher_forcing}")
        sizes = {"batch": (src.shape[0], "src")} if torch.is_tensor(src) and src.dim() == 2 else {}
        check_ids("tgt_in", tgt_in, self.cfg.tgt_vocab_size, shape=("batch", "tgt_len"), sizes=sizes)
        memory, _ = self.encode(src, src_lengths)
        return self.run_decoder(tgt_in, memory)


class IncrementalConvS2S(nn.Module):
    """A trained ``ConvS2S`` decoded the way Gehring et al.'s code (fairseq) decodes: every
    decoder convolution keeps its last k - 1 inputs from the calls before, so a new word costs
    one new position per layer instead of the window of ``receptive_field`` positions that
    ``ConvS2S.decode_step`` recomputes. The same weights and the same arithmetic per position:
    the same next-word distribution up to rounding. Use it wherever a model with ``encode`` and
    ``decode_step`` is expected (``greedy_decode``, ``beam_search``). Taught in: 03_convs2s."""

    def __init__(self, model: ConvS2S):
        super().__init__()
        if not isinstance(model, ConvS2S):
            raise TypeError(f"IncrementalConvS2S wraps a ConvS2S, got {type(model).__name__}")
        self.model = model

    def encode(self, src, src_lengths):
        """``memory`` as ``ConvS2S.encode``; ``state`` = the next word's position and, per
        decoder layer, its last k - 1 inputs (batch, H, k - 1): zeros before the first word,
        as the causal convolution's left padding."""
        memory, _ = self.model.encode(src, src_lengths)
        cfg = self.model.cfg
        z = memory["keys"]
        buffers = [z.new_zeros(src.shape[0], cfg.hidden_size, cfg.kernel_size - 1)
                   for _ in range(cfg.decoder_layers)]
        return memory, {"position": 0, "buffers": buffers}

    def decode_step(self, prev_tokens, state, memory):
        """log p of the next word (batch, V), the new state, and the last layer's attention
        of the newest word (batch, S): ``ConvS2S.decode_step`` computed one position a layer."""
        m, position = self.model, state["position"]
        if position >= m.cfg.max_positions:
            raise ValueError(f"sequence of {position + 1} tokens is longer than max_positions="
                             f"{m.cfg.max_positions}")
        z, ze, mask = memory["keys"], memory["values"], memory["mask"]
        g = m._embed(prev_tokens.unsqueeze(1), m.tgt_embedding, m.tgt_position, position)  # (batch, 1, E)
        x = m.dec_in(g).transpose(1, 2)                                  # (batch, H, 1)
        buffers, alpha = [], None
        for conv, att_in, att_out, past in zip(m.dec_convs, m.att_in, m.att_out, state["buffers"]):
            window = torch.cat([past, m.dropout(x)], dim=2)              # (batch, H, k): the last k inputs
            buffers.append(window[:, :, 1:])
            h = glu(conv(window)).transpose(1, 2)                        # (batch, 1, H): one new position
            d = att_in(h) + g
            alpha = masked_softmax(d @ z.transpose(1, 2), mask.unsqueeze(1))  # (batch, 1, S)
            h = (h + att_out(alpha @ ze)) * m.scale
            x = (h.transpose(1, 2) + x) * m.scale
        logits = m.out(m.dropout(m.dec_out(x.transpose(1, 2))))          # (batch, 1, V)
        return (torch.log_softmax(logits[:, -1], dim=-1), {"position": position + 1, "buffers": buffers},
                alpha[:, -1])
