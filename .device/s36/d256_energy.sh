#!/usr/bin/env bash
# Issue 15, thirty-sixth session: energy per call of sdpa_hopper's D=256 kernels (from the unseen
# run's databases) against cuDNN at the GPU's own clocks, and the causal pick under ncu beside
# cuDNN's. Output: $OUT/d256_energy.log.
set -u
exec > >(tee $OUT/d256_energy.log) 2>&1
source .device/ncu_prof.sh
mkdir -p runs/s36 && tar xzf .device/s36/out/unseen_work_fp16.tgz -C runs/s36
db=runs/s36/runs/unseen
for id in 41 25 12 57; do $E export $id --db $db/2x16x4096x256.db --out runs/s36/nc_$id > /dev/null || echo "export $id failed"; done
for id in 39 40 49 14; do $E export $id --db $db/2x16x4096x256_causal.db --out runs/s36/c_$id > /dev/null || echo "export $id failed"; done
python3 .device/s36/energy.py --shape 2,16,4096,256 --export runs/s36/nc_41 runs/s36/nc_25 runs/s36/nc_12 runs/s36/nc_57
python3 .device/s36/energy.py --shape 2,16,4096,256 --causal --export runs/s36/c_39 runs/s36/c_40 runs/s36/c_49 runs/s36/c_14
for f in runs/s36/c_39 runs/s36/c_40 runs/s36/c_49; do
  timeout 120 ncu --metrics $M -k regex:sdpa_hopper_fwd --launch-skip 1 -c 1 python3 scripts/attention-once.py \
    --export $f --shape 2,16,4096,256 --causal > $OUT/ncu_c.txt 2>&1
  echo "[$f causal] rc=$? $(grep -E 'pct_of_peak|duration|per_second' $OUT/ncu_c.txt | sed 's/  */ /g' | tr '\n' ';')"
done
timeout 120 ncu --metrics $M -k regex:cudnn --launch-skip 1 -c 1 python3 scripts/attention-once.py \
  --peer cudnn --shape 2,16,4096,256 --causal > $OUT/ncu_cudnn_c.txt 2>&1
echo "[cuDNN causal] rc=$? $(grep -E 'pct_of_peak|duration|per_second' $OUT/ncu_cudnn_c.txt | sed 's/  */ /g' | tr '\n' ';')"
