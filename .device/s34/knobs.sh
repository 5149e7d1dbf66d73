# The thirty-fourth session's sdpa_hopper kernels at 4,16,4096,128, sourced by h200_ncu.sh and
# pick_rounds.sh. HOPPER_BASE is the twenty-seventh session's fp16 pick as its ncu line names it,
# less the knobs the scripts vary (BLOCK_N, SOFTMAX_WARP_SYNC, STREAM_K): copied from that line,
# not retyped, since a first call that left RESCALE_UNDER_QK at its default read 2.5 points less.
HOPPER_BASE="FAST_EXP=1 INTRA_OVERLAP=1 KV_INTERLEAVE=0 LAST_CTA_COMBINES=0 NUM_CONSUMERS=2 PACK_GQA=0 PERSISTENT=1 PINGPONG=1 PRODUCER_REGS=24 RESCALE_UNDER_QK=1 SPLITS=1 STAGES=2 TMA_STORE=1"
S27_PICK="$HOPPER_BASE BLOCK_N=128 SOFTMAX_WARP_SYNC=1 STREAM_K=1"
# The 160-key kernel with SOFTMAX_WARP_SYNC, 80.5 % of the tensor pipe (pick_rounds.sh, and the
# thirty-fifth session's .device/s35/narrow.sh).
W160="$HOPPER_BASE BLOCK_N=160 SOFTMAX_WARP_SYNC=1 STREAM_K=1"
