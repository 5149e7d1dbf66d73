#!/usr/bin/env bash
# Forty-second session, one device call: the new q_empty broken-copy test, then a live
# `evo run --fix` (stored with the run, kept on resume) at 4,16,4096,128.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/gpu.txt
bash .device/gpu_tests.sh .device/s42/gpu_qempty.txt 200
db=$OUT/fix.db
for budget in 24 40; do
  timeout 150 build-bundle/evo run --template sdpa_hopper --shape 4,16,4096,128 --budget $budget \
    --seed 7 --fix LAGGED_MAX=0 --db $db --no-retime < /dev/null > $OUT/fix_run_$budget.txt 2>&1
  echo "fix run budget $budget: rc $?"
  grep -E "resuming|fixed|stopped" $OUT/fix_run_$budget.txt | cut -c1-250
done
build-bundle/evo show runs --db $db
build-bundle/evo show elite --db $db | cut -c1-250
sqlite3 $db "select count(*), sum(genome like '%\"LAGGED_MAX\":0%') from candidates" 2>/dev/null ||
  python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print(c.execute(\"select count(*), sum(genome like '%\\\"LAGGED_MAX\\\":0%') from candidates\").fetchone())" $db
