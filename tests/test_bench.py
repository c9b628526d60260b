"""The benchmark package (`make bench`, `python -m bench`): the report it writes, and that the
package's fast paths give exactly what the plain versions they replaced gave (bench.reference)."""

import json
import os
import subprocess
import sys

import pytest
import torch


from bench import cli, models, notebooks, speedups
from bench import reference as ref
from course_utils import data, decoding
from course_utils.seq2seq import Seq2Seq, Seq2SeqConfig


@pytest.mark.integration  # runs the whole quick benchmark in a process of its own: `make integration` (CI, after `make test`; issue 39)
def test_quick_bench_writes_the_table_and_json(tmp_path):
    # the benchmark measures the CPU ("no GPU" below): run as `make bench` runs it, in a process of
    # its own on the CPU, whatever device the tests run on
    env = {**os.environ, "COURSE_DEVICE": "cpu"}
    out = subprocess.run([sys.executable, "-m", "bench", "--quick", "--out", str(tmp_path)],
                         capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    report = json.loads((tmp_path / "benchmarks.json").read_text())
    md = (tmp_path / "BENCHMARKS.md").read_text()
    assert set(report["parts_run"]) == set(cli.DEFAULT_PARTS)
    notebooks = [r["notebook"] for r in report["notebooks"]["rows"]]
    assert "01_seq2seq_bottleneck.ipynb" in notebooks and "04_transformer.ipynb" in notebooks
    assert [r["model"] for r in report["models"]["rows"]] == list(models.MODELS)
    for row in report["models"]["rows"]:
        assert row["parameters"] > 0 and row["tokens_per_s"] > 0 and row["bucketing_speedup"] > 0
    assert report["models"]["padding_bucketed"] < report["models"]["padding_random"]
    assert {(r["module"], r["mode"]) for r in report["attention"]} == {
        ("sdpa", "forward"), ("sdpa", "forward+backward"), ("mha", "forward"), ("mha", "forward+backward")}
    assert all(r["ratio"] > 0 for r in report["attention"])
    assert report["bpe"]["same_merges"] is True and report["bpe"]["ratio"] > 0
    assert len(report["speedups"]) == 3 and all(r["speedup"] > 0 for r in report["speedups"])
    assert [r["model"] for r in report["loop"]] == ["03 ConvS2S (full)"]
    assert all(r["tight_ms"] > 0 and r["train_ms"] > 0 and r["ratio"] > 0 for r in report["loop"])
    for heading in ("## Notebooks", "## Models", "## The training loop", "## Attention", "## BPE", "## Speed-ups"):
        assert heading in md
    assert "no GPU" in md and "load average" in md


def test_a_part_that_is_not_run_keeps_its_numbers(tmp_path):
    assert cli.main(["--quick", "--out", str(tmp_path), "--parts", "bpe"]) == 0
    before = json.loads((tmp_path / "benchmarks.json").read_text())
    assert cli.main(["--quick", "--out", str(tmp_path), "--parts", "stored"]) == 0
    report = json.loads((tmp_path / "benchmarks.json").read_text())
    assert report["bpe"] == before["bpe"] and report["parts_run"] == ["bpe"]
    # a part run again keeps the report's machine and says where it was measured itself
    assert report["machine"] == before["machine"] and set(report["refreshed"]) == {"stored"}
    md = (tmp_path / "BENCHMARKS.md").read_text()
    assert "## BPE" in md and "Part *stored* measured again on " in md
    (tmp_path / "BENCHMARKS.md").unlink()
    assert cli.main(["--out", str(tmp_path), "--parts", ""]) == 0  # only renders the JSON again
    assert json.loads((tmp_path / "benchmarks.json").read_text()) == report
    assert "## BPE" in (tmp_path / "BENCHMARKS.md").read_text()


def test_unknown_parts_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        cli.main(["--parts", "micro,gpu", "--out", str(tmp_path)])
    assert "unknown parts ['gpu']" in capsys.readouterr().err


def test_stored_notebook_times_are_positive():
    rows = notebooks.stored_notebook_times()
    assert rows and all(r["seconds"] is None or r["seconds"] > 0 for r in rows)


# ---- the fast paths give exactly the old results ---------------------------------------

@pytest.fixture(scope="module")
def eos_model(small_synthetic, device):
    """A random attention model with sharp output distributions: with length normalisation,
    beam search then finishes hypotheses at many different steps (it and the batch on the
    device: both versions run there)."""
    train = data.TranslationData.build(small_synthetic.train)
    torch.manual_seed(0)
    model = Seq2Seq(Seq2SeqConfig(len(train.src_vocab), len(train.tgt_vocab), emb_size=16, hidden_size=16,
                                  bidirectional=True, attention="additive")).to(device).eval()
    with torch.no_grad():
        model.out.weight.mul_(5.0)
    batch = train.batches(12, shuffle=True, by_length=False)[0].to(device)
    return model, batch


@pytest.mark.parametrize("beam_size,alpha", [(1, 0.0), (3, 0.0), (4, 1.0)])
def test_beam_search_equals_the_plain_version(eos_model, beam_size, alpha):
    model, b = eos_model
    new, new_all = decoding.beam_search(model, b.src, b.src_lengths, beam_size, max_len=15, alpha=alpha,
                                        return_all=True)
    old, old_all = ref.beam_search(model, b.src, b.src_lengths, beam_size, max_len=15, alpha=alpha,
                                   return_all=True)
    if alpha > 0:
        assert len({len(t) for t in new.tokens}) > 3, "best hypotheses of several lengths"
    assert speedups._same_decoded(new, old) and new_all == old_all


def test_greedy_decode_equals_the_plain_version(eos_model):
    model, b = eos_model
    new = decoding.greedy_decode(model, b.src, b.src_lengths, max_len=15)
    old = ref.greedy_decode(model, b.src, b.src_lengths, max_len=15)
    assert speedups._same_decoded(new, old)
    assert all(w.shape == (len(t), int(n)) for w, t, n in zip(new.weights, new.tokens, b.src_lengths))


def test_pad_sequences_equals_the_plain_version():
    seqs = [[5, 6, 7], [8], [9, 10]]
    for given in (seqs, [torch.tensor(s) for s in seqs], [tuple(s) for s in seqs]):
        new, old = data.pad_sequences(given, pad_id=0), ref.pad_sequences(given, pad_id=0)
        assert torch.equal(new[0], old[0]) and torch.equal(new[1], old[1]) and new[0].dtype == torch.long
