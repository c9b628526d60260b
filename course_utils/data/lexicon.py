"""Which words go together across a parallel corpus: a Dice association lexicon and the
alignment sketch it gives, learned from co-occurrence alone, no model (00's first look at
alignment, before attention learns one).

Taught in: 00_welcome. Leaves out: any trained alignment (attention, 02).
"""

from __future__ import annotations

from collections import Counter
from typing import Mapping, Sequence

from course_utils.data.vocab import tokenize


def association_lexicon(pairs: Sequence[tuple[str, str]], max_pairs: int = 4000) -> dict[str, dict[str, float]]:
    """For each target word, the Dice association 2·c(s, t) / (c(s) + c(t)) with every source
    word it co-occurs with (counted once per sentence pair, over the first ``max_pairs``):
    an alignment sketch learned from co-occurrence alone, no model. Taught in: 00_welcome."""
    src_count, tgt_count, both = Counter(), Counter(), Counter()
    for src, tgt in pairs[:max_pairs]:
        s, t = set(tokenize(src)), set(tokenize(tgt))
        src_count.update(s)
        tgt_count.update(t)
        both.update((a, b) for a in s for b in t)
    lexicon: dict[str, dict[str, float]] = {}
    for (a, b), n in both.items():
        lexicon.setdefault(b, {})[a] = 2 * n / (src_count[a] + tgt_count[b])
    return lexicon


def alignment_sketch(src: str, tgt: str, lexicon: Mapping[str, Mapping[str, float]]) -> list[tuple[str, str, float]]:
    """(target word, its most associated source word in this pair, Dice) for each target word."""
    s = tokenize(src)
    out = []
    for b in tokenize(tgt):
        scores = lexicon.get(b, {})
        best = max(s, key=lambda a: scores.get(a, 0.0))
        out.append((b, best, scores.get(best, 0.0)))
    return out
