#!/bin/bash
# One GPU session's checks in one call (issue 32: "whenever a GPU is at hand, make full there
# and the unit tests on CUDA"), as learnt on an H200 on 2026-11-25:
#   1. each full recipe's training step alone (scripts/gpu_step_probe.py, ~1 min);
#   2. the unit tests on CUDA, with a JUnit report and a limit per test, so that a run stopped
#      at the call's limit still says which tests failed (the kill takes pytest's summary);
#   3. the full profile of NBS (default: every notebook), JOBS at a time (nine at once slowed
#      each other up to 7x on 2026-11-25 and about 1.6x on 2026-11-26, when all nine ran to
#      their end in 494 s: time them alone, JOBS=1, when the time is the point).
# All at once, 02-04 start before the notebooks whose results they read (scripts/run_full.py's
# READS) have written them: their comparison figures then lack those lines (01 -> 04 in order
# takes about 18 minutes on an H200, more than a call); each notebook's own results are whole.
# (The grader's tests are left out: they need nbgrader, which a GPU node may lack, and grading
# runs on the CPU on every machine.) Everything is written to /tmp/res and packed into $OUT/res.tgz every 15 s.
# Here, first: ../shared/gpu/bundle.sh (writes .gpu/, ignored by git), and strip the stored
# outputs of the notebooks if the tree is over the 64 MiB a call may carry. There, from the
# project root:   STAGES="probe unit full" NBS="notebooks/01_*.ipynb" JOBS=3 LIMIT=300 bash scripts/gpu_session.sh
# with `carry: [".gpu"]`. It takes at most 150 s (probe) + LIMIT (unit) + LIMIT per round of JOBS
# notebooks (full), plus a minute of set-up: size timeout_s to that, within the device time left.
set -u
cd "$(dirname "$0")/.."
eval "$(bash .gpu/setup.sh)"
R=/tmp/res; OUT=${OUT:-/tmp/out}; mkdir -p $R/nb $R/results "$OUT"; cp -r results/. $R/results/
LIMIT=${LIMIT:-400}; JOBS=${JOBS:-3}; NBS=${NBS:-notebooks/0*.ipynb}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $R/gpu.txt 2>&1
python3 -c 'import torch; print("torch", torch.__version__)' >> $R/gpu.txt
(while true; do tar czf "$OUT/res.tgz.tmp" -C /tmp res 2>/dev/null && mv "$OUT/res.tgz.tmp" "$OUT/res.tgz"; sleep 15; done) &
packer=$!

STAGES=${STAGES:-probe unit full}
if [[ " $STAGES " == *" probe "* ]]; then
timeout 150 python3 scripts/gpu_step_probe.py $R/probe.json > $R/probe.log 2>&1
tail -20 $R/probe.log
fi

unit_tests() {
COURSE_DEVICE=cuda COURSE_PROFILE=fast COURSE_NUM_THREADS=1 timeout $LIMIT python3 -m pytest -q -n ${UNIT_WORKERS:-6} \
    -p no:cacheprovider --timeout 120 --junitxml=$R/junit.xml -rf \
    --ignore-glob='tests/test_browser_*.py' --ignore=tests/test_slides.py --ignore=tests/test_book.py \
    --ignore=tests/test_install_check.py --ignore=tests/test_assignments.py \
    --ignore=tests/test_grader_sandbox.py --ignore=tests/test_grader_redteam.py \
    --deselect tests/test_notebooks.py::test_notebook_is_stored_executed_without_errors \
    tests > $R/unit.log 2>&1
echo "unit tests: exit $?" >> $R/unit.log
}
# BESIDE=1 runs the unit tests beside the notebooks (one call's limit holds both; the times
# then overstate each), else before them.
if [[ " $STAGES " == *" unit "* ]]; then
    if [ "${BESIDE:-0}" = 1 ]; then unit_tests & unit=$!; else unit_tests; tail -15 $R/unit.log; fi
fi

if [[ " $STAGES " == *" full "* ]]; then
nbpids=()
for nb in $NBS; do
    while [ "$(jobs -rp | wc -l)" -gt $(( JOBS + ${BESIDE:-0} )) ]; do sleep 2; done   # the packer is one job
    ( COURSE_PROFILE=full COURSE_NUM_THREADS=${NB_THREADS:-2} COURSE_RESULTS_DIR=$R/results \
      timeout $LIMIT python3 .gpu/run_notebook.py "$nb" $R/nb > "$R/$(basename "$nb" .ipynb).log" 2>&1 ) &
    nbpids+=($!)
done
wait "${nbpids[@]}"
fi
if [ -n "${unit:-}" ]; then wait $unit; tail -15 $R/unit.log; fi
kill $packer; tar czf "$OUT/res.tgz" -C /tmp res
for f in $R/nb/*.json; do
    python3 -c "import json; r = json.load(open('$f')); print(r['notebook'], r['status'], round(r['elapsed']), 's')"
done
