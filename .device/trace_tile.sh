# Sourced by the tenth session's device scripts on sdpa_hopper's persistent elite.
# ELITE: its knobs. with_knobs "K=V ...": ELITE with those values in place of its own.
# trace_tile LABEL TEMPLATES SHAPE: the one configuration of a trace_variant.py copy (every knob
# fixed) through the gates, exported, called by trace_read.py; its output in $OUT/trace_LABEL.txt.
E=${E:-build-bundle/evo}
ELITE="NUM_CONSUMERS=2 BLOCK_N=128 STAGES=2 FAST_EXP=1 PINGPONG=1 INTRA_OVERLAP=1 RESCALE_UNDER_QK=1 PERSISTENT=1 STREAM_K=1 TMA_STORE=1 PRODUCER_REGS=24 SPLITS=1 PACK_GQA=0 LAST_CTA_COMBINES=0"
with_knobs() {
  local out="" kv e
  for kv in $ELITE; do
    for e in $1; do [ "${e%%=*}" = "${kv%%=*}" ] && kv=$e; done
    out="$out $kv"
  done
  echo $out
}
trace_tile() {
  local label=$1 dir=$2 shape=$3 id b h s d
  rm -rf /tmp/t.db* /tmp/exp
  $E --templates $dir run --template sdpa_hopper --shape $shape --budget 1 --db /tmp/t.db --no-retime > $OUT/run_$label.txt 2>&1
  id=$($E --templates $dir show elite --db /tmp/t.db --json | python3 -c "import json,sys;print(json.load(sys.stdin)['elite'][0]['id'])")
  $E --templates $dir export $id --db /tmp/t.db --out /tmp/exp > $OUT/export_$label.txt 2>&1
  IFS=, read b h s d <<< "$shape"
  python3 .device/trace_read.py /tmp/exp $b $h $s $d > $OUT/trace_$label.txt 2>&1
}
