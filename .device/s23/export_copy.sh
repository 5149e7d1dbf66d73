# Sourced: export_copy FENCE SHAPE TAG KNOBS... exports softmax_fence_variant.py's copy with those
# knobs (one configuration, --budget 1) to /tmp/exp_FENCE_TAG. Needs E (trace_tile.sh).
export_copy() {  # FENCE SHAPE KNOBS...: OUT/exp_FENCE_TAG
  local f=$1 shape=$2 tag=$3; shift 3
  FENCE=$f python3 .device/s23/softmax_fence_variant.py /tmp/sf3_$f "$@" > /dev/null
  rm -rf /tmp/sf3_$f.db* /tmp/exp_${f}_$tag
  $E --templates /tmp/sf3_$f run --template sdpa_hopper --shape $shape --budget 1 --db /tmp/sf3_$f.db --no-retime > /tmp/run_$f.txt 2>&1
  local id=$($E --templates /tmp/sf3_$f show elite --db /tmp/sf3_$f.db --json | python3 -c "import json,sys;print(json.load(sys.stdin)['elite'][0]['id'])")
  $E --templates /tmp/sf3_$f export $id --db /tmp/sf3_$f.db --out /tmp/exp_${f}_$tag > /dev/null 2>&1 || cat /tmp/run_$f.txt
}
