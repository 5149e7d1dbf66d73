#!/usr/bin/env bash
# Q K^T with Q from registers (q_regs_variant.py) against the template, under ncu at locked
# clocks, interleaved, with and without STREAM_K at 4,16,4096,128 and at 1,16,16384,128; and the
# shared-memory pipe's activity of both.
set -u
source .device/ncu_prof.sh
source .device/trace_tile.sh
python3 .device/fixed_template.py /tmp/t_ref PINGPONG=1 > /dev/null
mk() { python3 .device/q_regs_variant.py /tmp/qr "$@" > /dev/null; }
pair() { local shape=$1; shift; for v in "$@"; do d=/tmp/qr; [ $v = ref ] && d=/tmp/t_ref; prof $v $d $shape $K; done; }
K=$(with_knobs "STREAM_K=0"); mk $K
pair 4,16,4096,128 qr ref qr
K=$(with_knobs "STREAM_K=1"); mk $K
pair 4,16,4096,128 qr ref qr
pair 1,16,16384,128 qr ref
M=sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed_pipe_uniform.avg.pct_of_peak_sustained_active,l1tex__data_bank_reads.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_writes.avg.pct_of_peak_sustained_elapsed
pair 4,16,4096,128 qr ref
