# Sourced by l2.sh and pairs.sh: the three causal shapes where the persistent heaviest-first walk
# was measured against one CTA per tile, each with the knobs of its search's pick (less the walk),
# and `opts`, evo's --set options for KNOB=VALUE words.
C128="NUM_CONSUMERS=2 BLOCK_N=128 STAGES=2 PINGPONG=1 INTRA_OVERLAP=1 RESCALE_UNDER_QK=1 SOFTMAX_WARP_SYNC=0 TMA_STORE=1 PRODUCER_REGS=24 FAST_EXP=1"
C256="NUM_CONSUMERS=2 BLOCK_N=80 STAGES=2 PINGPONG=1 INTRA_OVERLAP=1 RESCALE_UNDER_QK=1 SOFTMAX_WARP_SYNC=1 TMA_STORE=0 PRODUCER_REGS=24 FAST_EXP=1"
C64="NUM_CONSUMERS=3 BLOCK_N=128 STAGES=3 PINGPONG=1 INTRA_OVERLAP=1 RESCALE_UNDER_QK=0 SOFTMAX_WARP_SYNC=0 TMA_STORE=0 PRODUCER_REGS=24 FAST_EXP=1"
cases=("4,16,4096,128|$C128" "2,16,4096,256|$C256" "2,16,8192,64|$C64")
M=sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,dram__bytes_read.sum,lts__t_sector_hit_rate.pct
opts() { local kv; for kv in "$@"; do echo -n " --set $kv"; done; }
