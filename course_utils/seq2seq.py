"""GRU encoder-decoder models: the fixed-context bottleneck model (01) and the Bahdanau
attention model (02).

Taught in: 01_seq2seq_bottleneck (``Encoder``, context 'last' or 'mean', teacher
forcing), 02_bahdanau_attention (bi-directional encoder, attention decoder).
Leaves out: LSTMs, multi-layer and input-feeding (Luong) decoders.

Every model here (and in ``convs2s`` and ``transformer``) offers the interface that
``course_utils.decoding`` uses::

    memory, state = model.encode(src, src_lengths)       # what the decoder reads
    log_probs, state, weights = model.decode_step(prev_tokens, state, memory)

All tensors in ``memory`` and ``state`` have the batch as their first dimension, so
beam search can repeat and reorder them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from course_utils.attention import make_attention, padding_mask
from course_utils.checks import check_config, check_ids
from course_utils.data.vocab import PAD_ID, check_src_batch


@dataclass
class Seq2SeqConfig:
    """Sizes of a GRU encoder-decoder."""
    src_vocab_size: int
    tgt_vocab_size: int
    emb_size: int = 64          # word embedding size (both sides)
    hidden_size: int = 128      # GRU state size per direction
    bidirectional: bool = False  # encoder reads both ways (02) or left to right (01)
    context: str = "last"       # without attention: 'last' encoder state, 'mean' of all, or
                                # 'initial': the last state as s_0 only (Sutskever et al. 2014)
    attention: str | None = None  # None, 'dot', 'multiplicative', 'additive' or 'mlp'
    attn_size: int = 64         # hidden size of the additive / MLP score
    dropout: float = 0.1

    def __post_init__(self):
        check_config(self, positive=("src_vocab_size", "tgt_vocab_size", "emb_size", "hidden_size", "attn_size"),
                     fractions=("dropout",))
        if self.context not in ("last", "mean", "initial"):
            raise ValueError(f"context must be 'last', 'mean' or 'initial', got {self.context!r}")
        if self.attention not in (None, "dot", "multiplicative", "additive", "mlp"):
            raise ValueError("attention must be None, 'dot', 'multiplicative', 'additive' or "
                             f"'mlp', got {self.attention!r}")


class Encoder(nn.Module):
    """Embedding + GRU over the padded source. Taught in: 01 (one direction), 02 (both).

    ``forward(src (batch, src_len), src_lengths (batch,))`` returns ``outputs`` (batch,
    src_len, hidden * directions), zero at padded positions, and ``final`` (batch, hidden
    * directions): the last state of the forward GRU (and the first of the backward one).
    """

    def __init__(self, vocab_size: int, emb_size: int, hidden_size: int,
                 bidirectional: bool = False, dropout: float = 0.0):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_size, padding_idx=PAD_ID)
        self.rnn = nn.GRU(emb_size, hidden_size, batch_first=True, bidirectional=bidirectional)
        self.dropout = nn.Dropout(dropout)
        self.output_size = hidden_size * (2 if bidirectional else 1)

    def forward(self, src, src_lengths):
        embedded = self.dropout(self.embedding(src))  # (batch, src_len, emb)
        # packing makes the GRU stop at each sentence's last real token
        packed = pack_padded_sequence(embedded, src_lengths.cpu(), batch_first=True,
                                      enforce_sorted=False)
        outputs, h_n = self.rnn(packed)  # h_n: (directions, batch, hidden)
        outputs, _ = pad_packed_sequence(outputs, batch_first=True, total_length=src.shape[1])
        final = torch.cat(list(h_n), dim=-1)  # (batch, hidden * directions)
        return outputs, final


class Seq2Seq(nn.Module):
    """GRU encoder-decoder, with a fixed context (``attention=None``) or with attention.

    Without attention the decoder sees one vector c for the whole source: the encoder's
    last state (or the mean of its states) starts the decoder and is fed at every step,
    c = z_n (Cho et al. 2014); with ``context='initial'`` it only starts the decoder
    (Sutskever et al. 2014). With attention it computes c_i = sum_j alpha_ij z_j at every step i from its
    previous state s_{i-1}. Taught in: 01_seq2seq_bottleneck, 02_bahdanau_attention.
    """

    def __init__(self, cfg: Seq2SeqConfig):
        super().__init__()
        self.cfg = cfg
        self.encoder = Encoder(cfg.src_vocab_size, cfg.emb_size, cfg.hidden_size,
                               cfg.bidirectional, cfg.dropout)
        d = self.encoder.output_size  # size of z_j, of c_i and of the decoder state s_i
        self.embedding = nn.Embedding(cfg.tgt_vocab_size, cfg.emb_size, padding_idx=PAD_ID)
        self.init_state = nn.Linear(d, d)
        self.attention = (make_attention(cfg.attention, d, d, cfg.attn_size)
                          if cfg.attention else None)
        self.rnn = nn.GRU(cfg.emb_size + d, d, batch_first=True)
        self.out = nn.Linear(d + d + cfg.emb_size, cfg.tgt_vocab_size)
        self.dropout = nn.Dropout(cfg.dropout)

    # -- the decoding interface ------------------------------------------------------

    def encode(self, src, src_lengths):
        """Run the encoder; returns ``(memory, state)`` for ``decode_step``."""
        src_lengths = check_src_batch(src, src_lengths, self.cfg.src_vocab_size)
        outputs, final = self.encoder(src, src_lengths)
        mask = padding_mask(src_lengths, src.shape[1]).to(src.device)  # (batch, src_len)
        if self.cfg.context == "mean" and self.attention is None:
            summary = (outputs * mask.unsqueeze(-1)).sum(1) / src_lengths.to(outputs).unsqueeze(-1)
        else:
            summary = final
        memory = {"outputs": outputs, "mask": mask, "context": summary}
        if self.attention is not None:
            memory["prepared"] = self.attention.prepare(outputs)  # key part of e_ij, once
        state = torch.tanh(self.init_state(summary))  # s_0: (batch, d)
        return memory, state

    def decode_step(self, prev_tokens, state, memory):
        """One decoder step. ``prev_tokens`` (batch,), ``state`` s_{i-1} (batch, d).

        Returns log-probabilities (batch, vocab), the new state s_i and the attention
        weights (batch, src_len) (None without attention).
        """
        logits, state, weights = self._step(self.dropout(self.embedding(prev_tokens)), state, memory)
        return torch.log_softmax(logits, dim=-1), state, weights

    def _step(self, emb, state, memory):
        if self.attention is None:
            context, weights = self._fixed_context(memory), None
        else:
            # 1. score s_{i-1} against every z_j, 2. softmax over real positions, 3. c_i
            context, weights = self.attention(state, memory["outputs"], mask=memory["mask"],
                                              prepared=memory["prepared"])
        # 4. the GRU reads the previous word and the context
        output, h = self.rnn(torch.cat([emb, context], -1).unsqueeze(1), state.unsqueeze(0))
        state = h.squeeze(0)
        # 5. predict the next word from the state, the context and the previous word
        logits = self.out(self.dropout(torch.cat([state, context, emb], -1)))
        return logits, state, weights

    # -- training -------------------------------------------------------------------

    def forward(self, src, src_lengths, tgt_in, teacher_forcing: float = 1.0):
        """Logits (batch, tgt_len, vocab) for every position of ``tgt_in`` (``<sos> y1 ...``)
        and the attention weights (batch, tgt_len, src_len) (None without attention).

        With ``teacher_forcing`` < 1, each next input is the reference word with that
        probability and the model's own best guess otherwise.
        """
        sizes = {"batch": (src.shape[0], "src")} if torch.is_tensor(src) and src.dim() == 2 else {}
        check_ids("tgt_in", tgt_in, self.cfg.tgt_vocab_size, shape=("batch", "tgt_len"), sizes=sizes)
        memory, state = self.encode(src, src_lengths)
        if self.attention is None and teacher_forcing >= 1.0:
            return self._forward_fixed_context(tgt_in, state, memory), None
        logits, weights = [], []
        inputs = tgt_in[:, 0]
        for i in range(tgt_in.shape[1]):
            step_logits, state, w = self._step(self.dropout(self.embedding(inputs)), state, memory)
            logits.append(step_logits)
            weights.append(w)
            if i + 1 < tgt_in.shape[1]:
                inputs = tgt_in[:, i + 1]
                if teacher_forcing < 1.0:
                    use_model = torch.rand(inputs.shape, device=inputs.device) >= teacher_forcing
                    inputs = torch.where(use_model, step_logits.argmax(-1), inputs)
        attn = torch.stack(weights, 1) if self.attention is not None else None
        return torch.stack(logits, 1), attn

    def _fixed_context(self, memory):
        """The context every step reads without attention: the summary, or zeros with
        ``context='initial'`` (the source reaches the decoder through s_0 only; the weights
        that would read c get no gradient)."""
        if self.cfg.context == "initial":
            return torch.zeros_like(memory["context"])
        return memory["context"]

    def _forward_fixed_context(self, tgt_in, state, memory):
        """All steps at once (the context does not change): the same result, much faster."""
        emb = self.dropout(self.embedding(tgt_in))  # (batch, tgt_len, emb)
        context = self._fixed_context(memory).unsqueeze(1).expand(-1, tgt_in.shape[1], -1)
        outputs, _ = self.rnn(torch.cat([emb, context], -1), state.unsqueeze(0))
        return self.out(self.dropout(torch.cat([outputs, context, emb], -1)))


def next_word_loss(logits, tgt, label_smoothing: float = 0.0) -> torch.Tensor:
    """Mean cross-entropy of logits (batch, T, vocab) for the next words ``tgt[:, 1:]`` of
    ``tgt`` (batch, T + 1), over real (non-padded) positions."""
    return nn.functional.cross_entropy(logits.transpose(1, 2), tgt[:, 1:], ignore_index=PAD_ID,
                                       label_smoothing=label_smoothing)


def seq2seq_loss(model, batch, teacher_forcing: float = 1.0) -> torch.Tensor:
    """Mean cross-entropy of the next target word over real (non-padded) positions."""
    logits, _ = model(batch.src, batch.src_lengths, batch.tgt[:, :-1], teacher_forcing)
    return next_word_loss(logits, batch.tgt)
