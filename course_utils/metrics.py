"""Translation metrics: corpus BLEU (sacrebleu), exact match, scores by source length.

Taught in: 01_seq2seq_bottleneck. Leaves out: chrF, TER and learned metrics (sacrebleu
has the first two: ``sacrebleu.corpus_chrf``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence

from course_utils.data import DEFAULT_BUCKET_EDGES, bucket_label, bucket_labels


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
        raise ValueError("need at least one hypothesis, got none")


def bleu(hypotheses: Sequence, references: Sequence, tokenize: str = "13a") -> float:
    """Corpus BLEU (0-100) with sacrebleu's defaults; sentences as strings or token lists,
    one reference each. Taught in: 01_seq2seq_bottleneck."""
    import sacrebleu
    hyps, refs = _as_strings(hypotheses, "hypotheses"), _as_strings(references, "references")
    _check_lengths(hyps, refs)
    # force: the course scores its own tokens (words and punctuation split by data.tokenize),
    # which sacrebleu would otherwise warn about on every call ("tokenized period")
    return float(sacrebleu.corpus_bleu(hyps, [refs], tokenize=tokenize, force=True).score)


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
        raise ValueError(f"need one source length per hypothesis: got {len(src_lengths)} "
                         f"lengths and {len(hyps)} hypotheses")
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
