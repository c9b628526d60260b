"""The plain versions of the package functions that `course_utils` now runs faster: kept
verbatim (as of the commit before the speed-ups) so that `python -m bench` (bench.speedups) can time
before against after in one run and check that both give the same results.
Not part of the package; not used by the notebooks.
"""

import torch

from course_utils.data import EOS_ID, PAD_ID, PAD_ID as _PAD, SOS_ID, check_src_batch
from course_utils.decoding import Decoded, length_normalized, map_tensors


def pad_sequences(seqs, pad_id=_PAD):
    """The loop version: one small tensor per row, copied into a (batch, max_len) tensor."""
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)
    out = torch.full((len(seqs), int(lengths.max())), pad_id, dtype=torch.long)
    for row, seq in enumerate(seqs):
        out[row, : len(seq)] = torch.as_tensor(seq, dtype=torch.long)
    return out, lengths


@torch.no_grad()
def greedy_decode(model, src, src_lengths, max_len=60, temperature=None, generator=None):
    check_src_batch(src, src_lengths)
    was_training = model.training
    model.eval()
    memory, state = model.encode(src, src_lengths)
    batch = src.shape[0]
    prev = torch.full((batch,), SOS_ID, dtype=torch.long, device=src.device)
    done = torch.zeros(batch, dtype=torch.bool, device=src.device)
    scores = torch.zeros(batch, device=src.device)
    tokens, weights = [], []
    for _ in range(max_len):
        log_probs, state, w = model.decode_step(prev, state, memory)
        if temperature is None:
            nxt = log_probs.argmax(-1)
        else:
            probs = torch.softmax(log_probs / temperature, dim=-1)
            nxt = torch.multinomial(probs.cpu(), 1, generator=generator).squeeze(1).to(src.device)
        nxt = torch.where(done, torch.full_like(nxt, PAD_ID), nxt)
        scores += torch.where(done, 0.0, log_probs.gather(1, nxt.unsqueeze(1)).squeeze(1))
        tokens.append(nxt)
        weights.append(w)
        done |= nxt == EOS_ID
        prev = nxt
        if done.all():
            break
    model.train(was_training)
    ids = torch.stack(tokens, 1).tolist()
    out_tokens, out_weights = [], []
    for b, row in enumerate(ids):
        n = row.index(EOS_ID) + 1 if EOS_ID in row else len(row)
        out_tokens.append(row[:n])
        out_weights.append(torch.stack([w[b, : int(src_lengths[b])] for w in weights[:n]])
                           if weights[0] is not None else None)
    return Decoded(out_tokens, scores.tolist(), out_weights)



@torch.no_grad()
def beam_search(model, src, src_lengths, beam_size: int = 4, max_len: int = 60,
                alpha: float = 0.0, return_all: bool = False):
    """Beam search, batched over sentences. Taught in: 01_seq2seq_bottleneck.

    At every step each of the ``beam_size`` partial hypotheses is extended by every word;
    the ``beam_size`` best extensions by summed log-probability survive. A hypothesis that
    produces <eos> is finished and leaves the beam. The answer is the finished hypothesis
    with the best ``score / length**alpha`` (``alpha`` = length normalisation; 0 = none).
    With ``beam_size=1`` this is greedy decoding. Returns ``Decoded`` (and, with
    ``return_all``, every finished hypothesis per sentence as (tokens, score) lists).
    """
    check_src_batch(src, src_lengths)
    if not isinstance(beam_size, int) or beam_size < 1:
        raise ValueError(f"beam_size must be a positive int, got {beam_size!r}")
    was_training = model.training
    model.eval()
    batch, K, device = src.shape[0], beam_size, src.device
    memory, state = model.encode(src, src_lengths)
    # every sentence gets K rows: (batch * K, ...)
    memory = map_tensors(lambda t: t.repeat_interleave(K, dim=0), memory)
    state = map_tensors(lambda t: t.repeat_interleave(K, dim=0), state)
    scores = torch.full((batch, K), float("-inf"), device=device)
    scores[:, 0] = 0.0  # at the start only one hypothesis is alive: <sos>
    prefixes = torch.empty(batch * K, 0, dtype=torch.long, device=device)
    attn = []  # per step: (batch * K, src_len) weights of the surviving rows
    finished = [[] for _ in range(batch)]  # per sentence: (normalised, score, tokens, weights)
    prev = torch.full((batch * K,), SOS_ID, dtype=torch.long, device=device)
    for step in range(max_len):
        log_probs, state, w = model.decode_step(prev, state, memory)  # (batch * K, vocab)
        vocab = log_probs.shape[-1]
        candidates = scores.unsqueeze(-1) + log_probs.view(batch, K, vocab)  # (batch, K, vocab)
        # take 2K so that K unfinished ones remain even if up to K end in <eos>
        top_scores, top_index = candidates.view(batch, K * vocab).topk(min(2 * K, K * vocab), dim=-1)
        beam_origin, words = top_index // vocab, top_index % vocab  # (batch, 2K)
        new_scores = torch.full((batch, K), float("-inf"), device=device)
        rows = (torch.arange(batch, device=device) * K).unsqueeze(1).repeat(1, K)  # dead rows: own sentence
        new_words = torch.full((batch, K), PAD_ID, dtype=torch.long, device=device)
        for b in range(batch):
            kept = 0
            for score, origin, word in zip(top_scores[b].tolist(), beam_origin[b].tolist(),
                                           words[b].tolist()):
                if score == float("-inf") or kept == K:
                    break
                row = b * K + origin
                if word == EOS_ID:
                    tokens = prefixes[row].tolist() + [EOS_ID]
                    weights = (torch.stack([a[row] for a in attn] + [w[row]])[:, : int(src_lengths[b])]
                               if w is not None else None)
                    finished[b].append((length_normalized(score, len(tokens), alpha), score,
                                        tokens, weights))
                    continue
                new_scores[b, kept], rows[b, kept], new_words[b, kept] = score, row, word
                kept += 1
        # stop a sentence when it is decided. Without length normalisation: once no
        # unfinished hypothesis beats the best finished one (log-probs only fall, so none
        # ever will). With it, longer outputs may still win: stop at K finished ones.
        for b in range(batch):
            if finished[b] and (new_scores[b].max() <= max(f[1] for f in finished[b])
                                if alpha == 0.0 else len(finished[b]) >= K):
                new_scores[b] = float("-inf")
        flat_rows = rows.view(-1)
        prefixes = torch.cat([prefixes[flat_rows], new_words.view(-1, 1)], 1)
        attn = [a[flat_rows] for a in attn] + ([w[flat_rows]] if w is not None else [])
        state = map_tensors(lambda t: t[flat_rows], state)
        scores, prev = new_scores, new_words.view(-1)
        if torch.isinf(scores).all():
            break
    model.train(was_training)
    for b in range(batch):  # sentences that never produced <eos>: keep their best prefix
        if not finished[b]:
            k = int(scores[b].argmax())
            row = b * K + k
            tokens = prefixes[row].tolist()
            weights = torch.stack([a[row] for a in attn])[:, : int(src_lengths[b])] if attn else None
            finished[b].append((length_normalized(float(scores[b, k]), len(tokens), alpha),
                                float(scores[b, k]), tokens, weights))
    best = [max(f, key=lambda x: x[0]) for f in finished]
    decoded = Decoded([x[2] for x in best], [x[1] for x in best], [x[3] for x in best])
    if return_all:
        return decoded, [[(x[2], x[1]) for x in sorted(f, key=lambda x: -x[0])] for f in finished]
    return decoded


