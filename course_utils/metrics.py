"""Translation metrics: corpus BLEU (sacrebleu), exact match, scores by source length.

Taught in: 01_seq2seq_bottleneck. Leaves out: chrF, TER and learned metrics (sacrebleu
has the first two: ``sacrebleu.corpus_chrf``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence

from course_utils.data.vocab import DEFAULT_BUCKET_EDGES, bucket_label, bucket_labels


def _as_strings(sentences, name: str) -> list[str]:
    """Accept sentences as strings or token lists; return strings."""
    if isinstance(sentences, str):
        raise TypeError(f"{name} must be a list of sentences, got a single str")
    out = []
    for i, s in enumerate(sentences):
        if isinstance(s, str):
            out.append(s)
        elif isinstance(s, (list, tuple)) and all(isinstance(t, str) for t in s):
            out.append(" ".join(s))
        else:
            raise TypeError(f"{name}[{i}] must be a str or a list of str tokens, got {type(s).__name__}")
    return out


def _check_lengths(hypotheses, references) -> None:
    if len(hypotheses) != len(references):
        raise ValueError(f"need one reference per hypothesis: got {len(hypotheses)} hypotheses "
                         f"and {len(references)} references")
    if not hypotheses:
        raise ValueError("hypotheses must hold at least one sentence, got none")


def _reference_streams(references, count: int) -> list[list[str]]:
    """``references`` as sacrebleu's streams (a list of lists of ``count`` strings each).

    Given one reference per hypothesis (strings or token lists, the course's layout) there is
    one stream; given lists of sentences (sacrebleu's layout: one list per set of references,
    each as long as the hypotheses), those are the streams. A list of lists of single words
    that fits both (n token lists of n tokens each) is refused: say which by passing strings."""
    if isinstance(references, str):
        raise TypeError("references must be a list of sentences, got a single str")
    refs = list(references)
    nested = refs and all(isinstance(r, (list, tuple)) and r and all(isinstance(t, str) for t in r)
                          for r in refs)
    if not nested:
        return [_as_strings(refs, "references")]
    sentences = any(any(c.isspace() for c in t) for r in refs for t in r)  # a token never holds a space
    as_tokens, as_streams = len(refs) == count, all(len(r) == count for r in refs)
    if as_tokens and as_streams and count > 1 and not sentences:
        raise ValueError(f"references is ambiguous: {len(refs)} lists of {count} single words could be "
                         f"one token list per hypothesis or {len(refs)} reference streams (sacrebleu's "
                         "layout); pass each reference as a str sentence to say which")
    if as_tokens and not sentences:
        return [_as_strings(refs, "references")]
    if not as_streams:
        raise ValueError(f"references in sacrebleu's layout (lists of reference sentences) must hold "
                         f"one reference per hypothesis in every stream: {count} hypotheses, streams "
                         f"of {[len(r) for r in refs]}")
    return [list(r) for r in refs]


def bleu(hypotheses: Sequence, references: Sequence, tokenize: str = "13a") -> float:
    """Corpus BLEU (0-100) with sacrebleu's defaults; sentences as strings or token lists.
    ``references``: one per hypothesis, or sacrebleu's layout for several references per
    hypothesis (a list of reference streams, each one sentence per hypothesis).
    Taught in: 01_seq2seq_bottleneck."""
    import sacrebleu
    hyps = _as_strings(hypotheses, "hypotheses")
    if not hyps:
        raise ValueError("hypotheses must hold at least one sentence, got none")
    streams = _reference_streams(references, len(hyps))
    for stream in streams:
        _check_lengths(hyps, stream)
    # force: the course scores its own tokens (words and punctuation split by data.tokenize),
    # which sacrebleu would otherwise warn about on every call ("tokenized period")
    return float(sacrebleu.corpus_bleu(hyps, streams, tokenize=tokenize, force=True).score)


def exact_match(hypotheses: Sequence, references: Sequence) -> float:
    """Fraction of hypotheses identical to their reference (after joining tokens)."""
    hyps, refs = _as_strings(hypotheses, "hypotheses"), _as_strings(references, "references")
    _check_lengths(hyps, refs)
    return sum(h.split() == r.split() for h, r in zip(hyps, refs)) / len(hyps)


def scores_by_length(src_lengths: Sequence[int], hypotheses: Sequence, references: Sequence,
                     edges: Sequence[int] = DEFAULT_BUCKET_EDGES) -> list[dict]:
    """BLEU and exact match per source-length bucket: a list of
    ``{"bucket", "count", "bleu", "exact_match"}`` (empty buckets have count 0 and NaN
    scores). Taught in: 01_seq2seq_bottleneck."""
    hyps, refs = _as_strings(hypotheses, "hypotheses"), _as_strings(references, "references")
    _check_lengths(hyps, refs)
    if len(src_lengths) != len(hyps):
        raise ValueError(f"src_lengths must hold one source length per hypothesis: got "
                         f"{len(src_lengths)} lengths and {len(hyps)} hypotheses")
    groups = defaultdict(list)  # bucket label -> positions
    for i, n in enumerate(src_lengths):
        groups[bucket_label(int(n), edges)].append(i)
    rows = []
    for label in bucket_labels(edges):
        idx = groups.get(label, [])
        h, r = [hyps[i] for i in idx], [refs[i] for i in idx]
        rows.append({"bucket": label, "count": len(idx),
                     "bleu": bleu(h, r) if idx else float("nan"),
                     "exact_match": exact_match(h, r) if idx else float("nan")})
    return rows
