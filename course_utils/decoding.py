"""Decoding: greedy, sampling with temperature, beam search, and scoring a given output.

Taught in: 01_seq2seq_bottleneck; reused by 02, 03 and 04 for every model that offers
``encode(src, src_lengths) -> (memory, state)`` and ``decode_step(prev, state, memory)
-> (log_probs, state, weights)`` (see ``course_utils.seq2seq``).
Leaves out: diverse beam search, nucleus (top-p) sampling, constrained decoding.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from course_utils.checks import check_list, check_positive
from course_utils.data.vocab import EOS_ID, PAD_ID, SOS_ID, check_src_batch
from course_utils.runtime import cap_decode_len, check_device


def map_tensors(fn, tree):
    """Apply ``fn`` to every tensor in a tensor / tuple / list / dict structure."""
    if torch.is_tensor(tree):
        return fn(tree)
    if isinstance(tree, dict):
        return {k: map_tensors(fn, v) for k, v in tree.items()}
    if isinstance(tree, (tuple, list)):
        return type(tree)(map_tensors(fn, v) for v in tree)
    return tree


@dataclass
class Decoded:
    """Output of a decoder for a batch: token ids (without <sos>, cut after <eos>), their
    summed log-probabilities under the model and, for attention models, the weights."""
    tokens: list[list[int]]
    scores: list[float]
    weights: list[torch.Tensor | None]  # per sentence: (output_len, src_len) or None


@torch.no_grad()
def _sample_or_greedy(model, src, src_lengths, max_len, temperature, generator):
    src_lengths = check_src_batch(src, src_lengths)
    check_device(model, src, what="decoding")
    src_lengths = src_lengths.to(src.device)  # lengths may come from the CPU (packing wants them there)
    max_len = cap_decode_len(check_positive("max_len", max_len))  # capped only in a smoke test
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
    all_weights = torch.stack(weights, 1) if weights[0] is not None else None  # (batch, steps, src_len)
    out_tokens, out_weights = [], []
    for b, (row, length) in enumerate(zip(ids, src_lengths.tolist())):
        n = row.index(EOS_ID) + 1 if EOS_ID in row else len(row)
        out_tokens.append(row[:n])
        out_weights.append(all_weights[b, :n, :length].clone() if all_weights is not None else None)
    return Decoded(out_tokens, scores.tolist(), out_weights)


def greedy_decode(model, src, src_lengths, max_len: int = 60) -> Decoded:
    """Pick the most probable word at every step until <eos> (batched).
    Taught in: 01_seq2seq_bottleneck."""
    return _sample_or_greedy(model, src, src_lengths, max_len, None, None)


def sample_decode(model, src, src_lengths, temperature: float = 1.0, max_len: int = 60,
                  generator: torch.Generator | None = None) -> Decoded:
    """Draw every word from softmax(log p / temperature): low temperature approaches greedy,
    high temperature approaches uniform. Taught in: 01_seq2seq_bottleneck."""
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}; use greedy_decode for 0")
    return _sample_or_greedy(model, src, src_lengths, max_len, float(temperature), generator)


def length_normalized(score: float, length: int, alpha: float) -> float:
    """score / length^alpha: alpha=0 keeps the raw sum, alpha=1 gives the mean per word."""
    return score / (max(length, 1) ** alpha)


@torch.no_grad()
def beam_search(model, src, src_lengths, beam_size: int = 4, max_len: int = 60,
                alpha: float = 0.0, return_all: bool = False, trace=None):
    """Beam search, batched over sentences. Taught in: 01_seq2seq_bottleneck.

    At every step each of the ``beam_size`` partial hypotheses is extended by every word;
    the ``beam_size`` best extensions by summed log-probability survive. A hypothesis that
    produces <eos> is finished and leaves the beam. The answer is the finished hypothesis
    with the best ``score / length**alpha`` (``alpha`` = length normalisation; 0 = none).
    With ``beam_size=1`` this is greedy decoding. Returns ``Decoded`` (and, with
    ``return_all``, every finished hypothesis per sentence as (tokens, score) lists).

    ``trace``, if given, is called once per step with, for every sentence, the best
    extensions ranked (up to 2K) as (tokens, summed log-prob, what became of it): 'kept',
    'finished' (ended in <eos>) or 'pruned' (ranked, but the beam was full). The beam
    explorer of 01 draws from it (``translation_widgets.beam_trace``).
    """
    src_lengths = check_src_batch(src, src_lengths)
    check_device(model, src, what="decoding")
    src_lengths = src_lengths.to(src.device)  # lengths may come from the CPU (packing wants them there)
    if not isinstance(beam_size, int) or beam_size < 1:
        raise ValueError(f"beam_size must be a positive int, got {beam_size!r}")
    max_len = cap_decode_len(check_positive("max_len", max_len))  # capped only in a smoke test
    was_training = model.training
    model.eval()
    batch, K, device = src.shape[0], beam_size, src.device
    memory, state = model.encode(src, src_lengths)
    # every sentence gets K rows: (batch * K, ...)
    memory = map_tensors(lambda t: t.repeat_interleave(K, dim=0), memory)
    state = map_tensors(lambda t: t.repeat_interleave(K, dim=0), state)
    # summed log-probs in the model's precision (a float64 copy of a model sums in float64)
    dtype = next(model.parameters()).dtype
    scores = torch.full((batch, K), float("-inf"), dtype=dtype, device=device)
    scores[:, 0] = 0.0  # at the start only one hypothesis is alive: <sos>
    prefixes = torch.empty(batch * K, 0, dtype=torch.long, device=device)
    attn = None  # (batch * K, steps so far, src_len): weights of the surviving rows
    finished = [[] for _ in range(batch)]  # per sentence: (normalised, score, tokens, weights)
    prev = torch.full((batch * K,), SOS_ID, dtype=torch.long, device=device)
    lengths = src_lengths.tolist()
    for step in range(max_len):
        log_probs, state, w = model.decode_step(prev, state, memory)  # (batch * K, vocab)
        vocab = log_probs.shape[-1]
        candidates = scores.unsqueeze(-1) + log_probs.view(batch, K, vocab)  # (batch, K, vocab)
        # take 2K so that K unfinished ones remain even if up to K end in <eos>
        top_scores, top_index = candidates.view(batch, K * vocab).topk(min(2 * K, K * vocab), dim=-1)
        beam_origin, words = top_index // vocab, top_index % vocab  # (batch, 2K)
        # the bookkeeping below is plain Python on lists (one copy from the tensors per step)
        new_scores = [[float("-inf")] * K for _ in range(batch)]
        rows = [[b * K] * K for b in range(batch)]  # dead rows: own sentence
        new_words = [[PAD_ID] * K for _ in range(batch)]
        # prefixes as lists, made only when a hypothesis finishes (or the steps are traced)
        prefix_list = prefixes.tolist() if trace is not None else None
        shown = [[] for _ in range(batch)]  # for trace: the ranked extensions and their fate
        for b, (b_scores, b_origins, b_words) in enumerate(zip(top_scores.tolist(), beam_origin.tolist(),
                                                               words.tolist())):
            kept = 0
            for score, origin, word in zip(b_scores, b_origins, b_words):
                if score == float("-inf") or (kept == K and trace is None):
                    break
                row = b * K + origin
                if trace is not None:
                    shown[b].append((prefix_list[row] + [word], score,
                                     "pruned" if kept == K else "finished" if word == EOS_ID else "kept"))
                    if kept == K:
                        continue
                if word == EOS_ID:
                    prefix_list = prefixes.tolist() if prefix_list is None else prefix_list
                    tokens = prefix_list[row] + [EOS_ID]
                    weights = None
                    if w is not None:
                        weights = w[row: row + 1] if attn is None else torch.cat([attn[row], w[row: row + 1]])
                        weights = weights[:, : lengths[b]].clone()
                    finished[b].append((length_normalized(score, len(tokens), alpha), score,
                                        tokens, weights))
                    continue
                new_scores[b][kept], rows[b][kept], new_words[b][kept] = score, row, word
                kept += 1
        if trace is not None:
            trace(shown)
        # stop a sentence when it is decided. Without length normalisation: once no
        # unfinished hypothesis beats the best finished one (log-probs only fall, so none
        # ever will). With it, longer outputs may still win: stop at K finished ones.
        for b in range(batch):
            if finished[b] and (max(new_scores[b]) <= max(f[1] for f in finished[b])
                                if alpha == 0.0 else len(finished[b]) >= K):
                new_scores[b] = [float("-inf")] * K
        flat_rows = torch.tensor(rows, dtype=torch.long, device=device).view(-1)
        new_words = torch.tensor(new_words, dtype=torch.long, device=device)
        prefixes = torch.cat([prefixes[flat_rows], new_words.view(-1, 1)], 1)
        if w is not None:
            attn = w[flat_rows].unsqueeze(1) if attn is None else torch.cat(
                [attn[flat_rows], w[flat_rows].unsqueeze(1)], 1)
        state = map_tensors(lambda t: t[flat_rows], state)
        scores = torch.tensor(new_scores, dtype=scores.dtype, device=device)
        prev = new_words.view(-1)
        if torch.isinf(scores).all():
            break
    model.train(was_training)
    for b in range(batch):  # sentences that never produced <eos>: keep their best prefix
        if not finished[b]:
            k = int(scores[b].argmax())
            row = b * K + k
            tokens = prefixes[row].tolist()
            weights = attn[row][:, : lengths[b]].clone() if attn is not None else None
            finished[b].append((length_normalized(float(scores[b, k]), len(tokens), alpha),
                                float(scores[b, k]), tokens, weights))
    best = [max(f, key=lambda x: x[0]) for f in finished]
    decoded = Decoded([x[2] for x in best], [x[1] for x in best], [x[3] for x in best])
    if return_all:
        return decoded, [[(x[2], x[1]) for x in sorted(f, key=lambda x: -x[0])] for f in finished]
    return decoded


@torch.no_grad()
def sequence_log_prob(model, src, src_lengths, tokens: list[list[int]]) -> list[float]:
    """The model's own score of given outputs: summed log-probabilities of each token list
    (ending in <eos>), fed word by word. Taught in: 01_seq2seq_bottleneck."""
    src_lengths = check_src_batch(src, src_lengths)
    check_device(model, src, what="decoding")
    src_lengths = src_lengths.to(src.device)  # lengths may come from the CPU (packing wants them there)
    tokens = check_list("tokens", tokens, "token id lists")
    if len(tokens) != src.shape[0]:
        raise ValueError(f"tokens must hold one token list per source sentence: got {len(tokens)} "
                         f"lists for {src.shape[0]} sentences")
    was_training = model.training
    model.eval()
    memory, state = model.encode(src, src_lengths)
    longest = max(len(t) for t in tokens)
    target = torch.full((len(tokens), longest), PAD_ID, dtype=torch.long, device=src.device)
    for i, t in enumerate(tokens):
        target[i, : len(t)] = torch.as_tensor(t, dtype=torch.long)
    prev = torch.full((len(tokens),), SOS_ID, dtype=torch.long, device=src.device)
    total = torch.zeros(len(tokens), device=src.device)
    for i in range(longest):
        log_probs, state, _ = model.decode_step(prev, state, memory)
        real = target[:, i] != PAD_ID
        total += torch.where(real, log_probs.gather(1, target[:, i:i + 1]).squeeze(1), 0.0)
        prev = target[:, i]
    model.train(was_training)
    return total.tolist()


def check_vocab_sizes(model, data) -> None:
    """A ValueError naming ``data`` unless the model was built for ``data``'s vocabularies
    (its config's ``src_vocab_size`` and ``tgt_vocab_size``, where it has them)."""
    cfg = getattr(model, "cfg", None) or getattr(getattr(model, "model", None), "cfg", None)
    for side in ("src", "tgt"):
        size, vocab = getattr(cfg, f"{side}_vocab_size", None), getattr(data, f"{side}_vocab", None)
        if size is not None and vocab is not None and size != len(vocab):
            raise ValueError(f"the model and data do not belong together: the model was built for "
                             f"{size} {side} words, data's {side}_vocab has {len(vocab)}; pass the "
                             f"TranslationData the model was trained with")


def translate(model, data, pairs_or_sources, method: str = "greedy", batch_size: int = 128,
              device=None, **kwargs) -> list[list[str]]:
    """Translate sentences (strings, or (source, target) pairs) with ``data``'s vocabularies,
    in length-sorted batches; returns token lists in the input order.
    ``method``: 'greedy', 'beam' (``beam_size``, ``alpha``) or 'sample' (``temperature``)."""
    decoders = {"greedy": greedy_decode, "beam": beam_search, "sample": sample_decode}
    if method not in decoders:
        raise ValueError(f"method must be one of {sorted(decoders)}, got {method!r}")
    device = device or check_device(model, what="translate")
    check_vocab_sizes(model, data)
    items = [p if isinstance(p, tuple) else (p, "") for p in
             check_list("pairs_or_sources", pairs_or_sources, "sentences or (source, target) pairs")]
    encoded = data.with_pairs([(s, t or "x") for s, t in items])
    results: list[list[str] | None] = [None] * len(items)
    for batch in encoded.batches(batch_size, shuffle=False, by_length=True):
        batch = batch.to(device)
        out = decoders[method](model, batch.src, batch.src_lengths, **kwargs)
        for i, toks in zip(batch.index.tolist(), out.tokens):
            results[i] = data.tgt_vocab.decode(toks)
    return results


def score_translations(model, data, pairs, method: str = "greedy", batch_size: int = 128,
                       **kwargs) -> dict:
    """Translate (source, reference) ``pairs`` and score them against the references:
    ``{'hypotheses', 'bleu', 'exact_match', 'by_length'}`` (rows of
    ``metrics.scores_by_length``). Taught in: 01_seq2seq_bottleneck (written out there)."""
    from course_utils.data.vocab import tokenize
    from course_utils.metrics import bleu, exact_match, scores_by_length
    pairs = check_list("pairs", pairs, "(source, reference) pairs")
    hyps = translate(model, data, pairs, method=method, batch_size=batch_size, **kwargs)
    refs = [tokenize(t) for _, t in pairs]
    return {"hypotheses": hyps, "bleu": bleu(hyps, [" ".join(r) for r in refs]), "exact_match": exact_match(hyps, refs),
            "by_length": scores_by_length([len(tokenize(s)) for s, _ in pairs], hyps, refs)}
