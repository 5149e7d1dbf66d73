# A short check of 9fb4eea's evo on the H100: evo compile with the reference line, evo bench,
# a fresh run of 16 candidates, its resume under a leading-zero budget, and sweep --count.
set -u
E=build-bundle/evo
$E compile -t sdpa_hopper --shape 2,8,2048,128 2>&1 | tail -3
$E bench --shape 2,8,1024,64 2>&1 | grep -E "^verdict|^timing|^correctness|^reference"
$E run --budget 16 --seed 3 --db $OUT/smoke.db 2>&1 | tail -4
$E run --budget 024 --db $OUT/smoke.db 2>&1 | grep -E "resuming|stopped"
$E sweep -t sdpa_fp16 --shape 2,8,3000000000,64 --count sm_90 2>&1 | cut -c1-160
