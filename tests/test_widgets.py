import html

import pytest
import torch

from course_utils.translation_widgets import Walkthrough, attention_stepper, step_html


def _items():
    a = Walkthrough(["twenty", "-", "one", "<eos>"], ["ein", "und", "zwanzig", "<eos>"],
                    torch.tensor([[0.0, 0.1, 0.9, 0.0], [0.0, 0.8, 0.2, 0.0],
                                  [0.95, 0.05, 0.0, 0.0], [0.0, 0.0, 0.1, 0.9]]))
    b = Walkthrough(["seven", "<eos>"], ["sieben", "<eos>"], torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
    return [a, b]


def test_step_view_shows_the_current_word_and_the_most_attended_source_word():
    html = step_html(_items()[0], 2)
    assert "attends most to <b>twenty</b> (0.95)" in html
    assert 'ein und <b style="color: #c00">zwanzig</b>' in html
    with pytest.raises(IndexError, match=r"step must be in 0..3, got 4"):
        step_html(_items()[0], 4)


def test_stepper_reacts_to_slider_and_picker():
    box = attention_stepper(_items())
    assert box.slider.max == 3 and "attends most to <b>one</b>" in box.view.value
    box.slider.value = 1
    assert "attends most to <b>-</b> (0.80)" in box.view.value
    box.slider.value = 3
    box.picker.value = 1  # a shorter sentence: the slider shrinks and the view follows
    assert box.slider.max == 1 and box.slider.value == 1
    assert '<b style="color: #c00">&lt;eos&gt;</b>' in box.view.value
    assert "sieben" in box.view.value


def test_bad_walkthroughs():
    with pytest.raises(ValueError, match=r"weights must be \(output, source\) = \(1, 2\), got \(2, 2\)"):
        Walkthrough(["a", "b"], ["x"], torch.ones(2, 2))
    with pytest.raises(ValueError, match="at least one decoded sentence"):
        attention_stepper([])


# ---- the frame: a static fallback for pages without a kernel ----

def test_an_explorer_sends_its_view_as_html_beside_the_widget():
    box = attention_stepper(_items())
    box.slider.value = 2
    bundle = box._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "static view (no kernel)" in bundle["text/html"] and "step = 2" in bundle["text/html"]
    assert box.view.value in bundle["text/html"]


def _number(pattern, text):
    import re
    match = re.search(pattern, text)
    assert match, f"{pattern!r} not in {text[:300]!r}"
    return float(match.group(1))


# ---- 04: softmax saturation and masks ----

def test_saturation_shows_the_spread_growing_with_d_k_until_scaled():
    from course_utils.translation_widgets import softmax_saturation
    box = softmax_saturation()
    spread = lambda: _number(r"std of the scores ([\d.]+)", box.view.value)
    largest = lambda: _number(r"largest weight ([\d.]+)", box.view.value)
    assert 7 < spread() < 9  # d_k = 64: std sqrt(64) = 8
    box.d_k.value = 1024
    assert 29 < spread() < 35 and largest() > 0.9  # saturated: one key takes almost everything
    box.scale.value = True
    assert 0.9 < spread() < 1.1 and largest() < 0.6
    assert 'src="data:image/png;base64,' in box.view.value  # the histogram and the weights, drawn


def test_mask_explorer_shows_the_mask_and_a_real_layers_weights():
    from course_utils.attention import MultiHeadAttention
    from course_utils.translation_widgets import mask_explorer
    torch.manual_seed(0)
    box = mask_explorer(MultiHeadAttention(8, 2), lengths="2, 4")
    mask_table = lambda: box.view.value.split("weights, head 0")[0]
    assert mask_table().count("■") - 1 == 4 * 2  # 4 queries may each see the 2 real keys
    assert "Masked keys get weight 0.00; the weights of query q0 sum to 1.00" in box.view.value
    box.causal.value, box.row.value = True, 1
    assert mask_table().count("■") - 1 == 10  # the lower triangle of a 4 x 4 matrix
    box.lengths.value = "3, 1, 4, 2"
    assert box.row.max == 3
    box.lengths.value = "3, x"
    assert "lengths must be whole numbers" in box.view.value and "Traceback" not in box.view.value
    assert "showing the last valid batch [3, 1, 4, 2]" in box.view.value
    before = box.view.value
    box.row.value = 0  # the last valid batch still answers the row slider
    assert box.view.value != before
    box.lengths.value = "40"
    assert "each from 1 to 12" in box.view.value


# ---- 03: receptive fields and attention per layer ----

@pytest.mark.parametrize("layers, kernel", [(1, 3), (2, 3), (4, 5), (3, 2)])
def test_receptive_field_grid_agrees_with_the_formula(layers, kernel):
    from course_utils.convs2s import receptive_field
    from course_utils.translation_widgets import reach, receptive_field_explorer
    for causal in (False, True):
        seen = reach(20, layers, kernel, 41, causal)[0]
        assert len(seen) == receptive_field(layers, kernel)
        if causal:
            assert max(seen) == 20  # nothing later than the output
    box = receptive_field_explorer(length=24)
    box.kernel.value, box.layers.value, box.mode.value, box.position.value = kernel, layers, True, 23
    assert f"= {receptive_field(layers, kernel)} input positions" in box.view.value
    box.position.value = 0  # at the start the causal field is cut off by the sequence's start
    assert "(the grid shows 1:" in box.view.value


def test_layer_attention_picks_the_layer():
    from course_utils.translation_widgets import LayerAttention, layer_attention
    w = torch.stack([torch.eye(2), torch.tensor([[0.5, 0.5], [0.5, 0.5]])])
    box = layer_attention([LayerAttention(["a", "b"], ["x", "y"], w)])
    assert "mean largest weight 1.00" in box.view.value
    box.layer.value = 1
    assert "decoder layer 2 of 2: mean largest weight 0.50" in box.view.value
    with pytest.raises(ValueError, match=r"weights must be \(layers, 2, 2\)"):
        LayerAttention(["a", "b"], ["x", "y"], torch.ones(2, 2))


# ---- 01: beam search, step by step ----

@pytest.fixture(scope="module")
def seq2seq(small_synthetic, device):
    from course_utils.data import TranslationData
    from course_utils.seq2seq import Seq2Seq, Seq2SeqConfig
    data = TranslationData.build(small_synthetic.train)
    torch.manual_seed(0)
    model = Seq2Seq(Seq2SeqConfig(len(data.src_vocab), len(data.tgt_vocab), emb_size=16, hidden_size=32,
                                  bidirectional=True, attention="additive", attn_size=16, dropout=0.0))
    return data, model.to(device).eval(), [s for s, _ in small_synthetic.test[:6]]


@pytest.mark.parametrize("beam, alpha", [(1, 0.0), (3, 0.0), (5, 1.0), (2, 0.5)])
def test_the_traced_beam_finds_what_beam_search_finds(seq2seq, beam, alpha, device):
    from course_utils.data import tokenize
    from course_utils.decoding import beam_search
    from course_utils.translation_widgets import beam_trace
    data, model, sources = seq2seq
    for source in sources:
        ids = data.src_vocab.encode(tokenize(source))
        trace = beam_trace(model, ids, beam, alpha, max_len=20)
        decoded = beam_search(model, torch.tensor([ids], device=device), torch.tensor([len(ids)]), beam_size=beam,
                              max_len=20, alpha=alpha)
        assert trace.tokens == decoded.tokens[0] and abs(trace.score - decoded.scores[0]) < 1e-4
        for step in trace.steps:  # ranked, at most K kept, the rest finished or pruned
            scores = [s for _, s, _ in step.candidates]
            assert scores == sorted(scores, reverse=True)
            assert sum(status == "kept" for *_, status in step.candidates) <= beam


def test_beam_explorer_moves_with_its_sliders(seq2seq):
    from course_utils.translation_widgets import beam_explorer
    data, model, sources = seq2seq
    box = beam_explorer(model, data, sources, max_len=20)
    assert "winner:" in box.view.value and box.step.max >= 1
    box.beam.value = 1
    assert box.view.value.count(" kept ") == 1  # greedy: one hypothesis survives each step
    box.step.value = box.step.max
    box.beam.value, box.alpha.value = 6, 1.0
    assert "/ length^1 =" in box.view.value and box.step.value <= box.step.max


# ---- 05: what the masked language model guesses ----

@pytest.fixture(scope="module")
def small_bert(device):
    from course_utils.bert_training import load_pretrained
    model, tokenizer, _ = load_pretrained()
    return model.to(device), tokenizer


def test_mlm_explorer_guesses_and_redraws_the_masking(small_bert):
    from course_utils.pretraining_widgets import mlm_explorer
    box = mlm_explorer(*small_bert, "She was very happy to see him again.", "happy")
    shown = box.view.value
    assert "She was very [MASK] to see him again ." in shown and "[MASK] 1" in shown
    probabilities = [float(p) for p in __import__("re").findall(r">([\d.]+)%<", shown)]
    assert len(probabilities) == 5 and probabilities == sorted(probabilities, reverse=True) and sum(probabilities) <= 100
    first = box.view.value.split("training-time masking")[1]
    box.reroll.click()
    assert box.draw.value == 1 and box.view.value.split("training-time masking")[1] != first
    box.masked.value = "see, him"
    assert "[MASK] 2" in box.view.value
    box.top.value = 2
    assert len(__import__("re").findall(r">([\d.]+)%<", box.view.value)) == 2 * 2
    box.sentence.value = "Attention is all you need"  # the words to mask are not in it: its last word is
    assert box.masked.value == "need" and "Attention is all you [MASK]" in box.view.value


@pytest.mark.parametrize("sentence, masked, message", [
    ("", "x", "type a sentence"),
    ("She was happy.", "", "type the words to mask"),
    ("She was happy.", "zebra", "not a word of the sentence: zebra"),
    ("the happy " * 40, "happy", "the model reads at most"),
])
def test_mlm_explorer_answers_bad_input_with_a_message(small_bert, sentence, masked, message):
    from course_utils.pretraining_widgets import mlm_explorer
    box = mlm_explorer(*small_bert, "She was happy.", "happy")
    box.sentence.value = sentence
    box.masked.value = masked
    assert message in box.view.value and "course-message" in box.view.value


def test_mlm_explorer_names_words_it_does_not_know(small_bert):
    from course_utils.pretraining_widgets import mlm_explorer
    box = mlm_explorer(*small_bert, "She saw a Ж today.", "today")
    assert "unknown to the vocabulary (read as [UNK]): Ж" in box.view.value


# ---- 05b_bert_finetuning: what the fine-tuned models make of a sentence ----

class _Pointer(torch.nn.Module):
    """A stand-in for a fine-tuned head: scores 8 (a name; a span's start and end) on the pieces
    whose id is ``target``, 0 elsewhere: the known answer of the view."""

    def __init__(self, target: int):
        super().__init__()
        self.target, self.weight = target, torch.nn.Parameter(torch.zeros(1))

    def forward(self, input_ids, token_type_ids=None, attention_mask=None):
        hit = (input_ids == self.target).float() * 8 + self.weight
        return torch.stack([torch.zeros_like(hit), hit], -1)


def test_finetuned_explorer_shows_what_each_start_tags_and_answers(small_bert, device):
    from course_utils.pretraining_widgets import finetuned_explorer
    _, tok = small_bert
    anne, wentworth = (tok.convert_tokens_to_ids(w) for w in ("anne", "wentworth"))
    assert tok.unk_token_id not in (anne, wentworth)
    starts = {"points at anne": {"names": (_Pointer(anne).to(device), tok), "span": (_Pointer(anne).to(device), tok)},
              "points at wentworth": {"names": (_Pointer(wentworth).to(device), tok),
                                      "span": (_Pointer(wentworth).to(device), tok)}}
    box = finetuned_explorer(starts, "Anne smiled at Captain Wentworth .", "smiled")
    rows = box.view.value.split("<tr>")[2:]
    assert len(rows) == 2 and "points at anne" in rows[0] and "points at wentworth" in rows[1]
    assert '<b style="color: #a00">Anne</b><sub>1.00</sub>' in rows[0] and "Wentworth</b>" not in rows[0]
    assert '<b style="color: #a00">Wentworth</b>' in rows[1] and "Anne</b>" not in rows[1]
    assert rows[0].endswith("<td style=\"padding: 4px 8px\">Anne</td></tr>")
    assert "Wentworth</td></tr></table>" in rows[1]
    assert "who smiled ...?" in box.view.value
    box.word.value = "at"                                     # another question, the same answers
    assert "who at ...?" in box.view.value and "course-message" not in box.view.value


@pytest.mark.parametrize("sentence, word, message", [
    ("", "x", "type a sentence"),
    ("Anne smiled .", "laughed", "type a word of the sentence, got 'laughed'"),
    ("Anne smiled " * 40, "smiled", "longer than the 48 pieces"),
])
def test_finetuned_explorer_answers_bad_input_with_a_message(small_bert, device, sentence, word, message):
    from course_utils.pretraining_widgets import finetuned_explorer
    _, tok = small_bert
    pointer = _Pointer(tok.convert_tokens_to_ids("anne")).to(device)
    box = finetuned_explorer({"one": {"names": (pointer, tok), "span": (pointer, tok)}}, "Anne smiled .", "smiled")
    box.sentence.value = sentence
    box.word.value = word
    assert message in html.unescape(box.view.value) and "course-message" in box.view.value


# ---- 00: the datasets ----

def test_dataset_browser_filters_by_length_and_sketches_an_alignment(small_synthetic):
    from course_utils.data import tokenize
    from course_utils.data import association_lexicon
    from course_utils.translation_widgets import dataset_browser
    lexicon = association_lexicon(small_synthetic.train)
    assert max(lexicon["zwanzig"], key=lexicon["zwanzig"].get) == "twenty"
    box = dataset_browser({"synthetic": small_synthetic.train, "other": small_synthetic.test[:20]},
                          {"synthetic": lexicon})
    box.lengths.value = (6, 8)
    counts = [int(c) for c in __import__("re").findall(r'<tr><td[^>]*>(\d+)</td>', box.view.value.split("alignment")[0])]
    assert len(counts) == 5 and all(6 <= c <= 8 for c in counts)
    expected = sum(1 for s, _ in small_synthetic.train if 6 <= len(tokenize(s)) <= 8)
    assert f"{expected:,} of {len(small_synthetic.train):,} pairs have 6-8 source words" in box.view.value
    first = box.view.value
    box.draw.value = 1
    assert box.view.value != first and "alignment sketch" in box.view.value
    box.corpus.value = "other"
    assert "alignment sketch" not in box.view.value
    box.lengths.value = (1, 1)
    assert "no pair has 1-1 source words" in box.view.value


def test_vit_attention_explorer_follows_image_layer_and_head(device):
    from course_utils import vit
    from course_utils.pretraining_widgets import vit_attention, vit_attention_html
    torch.manual_seed(0)
    model = vit.ViT(vit.ViTConfig(d_model=16, num_heads=2, num_layers=2, d_ff=32)).to(device)
    images, labels = torch.rand(3, 1, 8, 8), torch.tensor([4, 7, 1])   # on the CPU: the explorer moves them
    box = vit_attention(model, images, labels)
    assert "label 4" in box.view.value and "layer 2, mean of heads" in box.view.value
    box.image.value = 1
    assert "label 7" in box.view.value
    box.head.value = -2
    assert "rollout, layers 1-2" in box.view.value
    box.layer.value, box.head.value = 1, 1
    assert "layer 1, head 1" in box.view.value and "<img" in box.view.value
    model.train()
    vit_attention_html(model, images, labels, 0, 1, 0)
    assert model.training, "the view left a training model in eval mode"
    model.eval()
    vit_attention_html(model, images, labels, 0, 1, 0)
    assert not model.training
    with pytest.raises(ValueError, match=r"layer must be in 1..2, got 3"):
        vit_attention_html(model, images, labels, 0, 3, -1)
    with pytest.raises(ValueError, match=r"image must be in 0..2, got 3"):
        vit_attention_html(model, images, labels, 3, 1, -1)
    with pytest.raises(ValueError, match="as many labels as images, got 3 images and 2 labels"):
        vit_attention(model, images, labels[:2])


def test_gpt_generate_explorer_follows_prompt_and_sampler_settings(device):
    from course_utils import gpt
    from course_utils.bpe import BPETokenizer
    from course_utils.pretraining_widgets import gpt_generate, gpt_generate_html
    tok = BPETokenizer([("t", "h"), ("th", "e"), ("Ġ", "the")], byte_level=True)
    torch.manual_seed(0)
    model = gpt.GPT(gpt.GPTConfig(len(tok), max_len=16, d_model=16, num_heads=2, num_layers=1, d_ff=32)).to(device)
    box = gpt_generate(model, tok, prompt="the theme", max_new_tokens=6)
    first = box.view.value
    assert "<b>the theme</b>" in first and "temperature 0.80" in first and "seed 0" in first
    box.seed.value = 3
    assert box.view.value != first and "seed 3" in box.view.value
    box.temperature.value = 0.0
    greedy = box.view.value
    assert "(greedy)" in greedy
    box.top_k.value = 5                       # greedy ignores the filters
    assert box.view.value.split("</div>", 1)[1] == greedy.split("</div>", 1)[1]
    box.prompt.value = "then"
    assert "<b>then</b>" in box.view.value
    # the continuation is what generate gives
    ids = torch.tensor([tok.encode("then")], device=device)
    expected = tok.decode(gpt.generate(model, ids, 6, temperature=0)[0, ids.shape[1]:].tolist())
    assert html.escape(expected) in box.view.value
    with pytest.raises(ValueError, match="type a prompt"):
        gpt_generate_html(model, tok, "", 1.0, 0, 1.0, 0)
    box.prompt.value = ""
    assert "type a prompt" in box.view.value
