"""The grader's verdicts (scripts/grader_verdicts.py) hold when a folder is graded by
several threads at once."""

import dataclasses
import json
import threading

import test_assignments as T  # noqa: F401  (puts scripts/ on sys.path, as the grader's tests do)
import grader_sandbox  # noqa: E402
import grader_verdicts  # noqa: E402

SOURCE = T.SOURCE


def test_reference_answers_computed_in_threads_are_the_ones_computed_alone():
    # A folder is graded by several threads, and the checks draw their inputs and reference
    # weights from torch's global generator (torch.manual_seed): without the lock in
    # grader_verdicts, threads drew each other's numbers and correct answers lost points.
    checks = grader_verdicts.load_checks(SOURCE / "a2_transformer" / "a2_transformer.ipynb")
    # the questions whose cases seed the generator and are quick to compute
    questions = {gid: checks[gid] for gid in ("test_masks", "test_multi_head_attention",
                                              "test_encoder_layer", "test_decoder_layer")}

    def computed():
        fresh = {gid: dataclasses.replace(q, _cache={}) for gid, q in questions.items()}
        return {gid: json.dumps(grader_sandbox.encode([q.cases(), q.expected()])) for gid, q in fresh.items()}

    alone = computed()
    in_threads, errors = [], []

    def work():
        try:
            in_threads.append(computed())
        except Exception as err:  # noqa: BLE001
            errors.append(repr(err))
    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(in_threads) == 6
    differ = sorted({gid for run in in_threads for gid in run if run[gid] != alone[gid]})
    assert differ == [], f"computed in threads, these questions' cases or answers changed: {differ}"
