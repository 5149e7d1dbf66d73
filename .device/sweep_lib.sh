# Shared by the held-out sweeps' scripts (from the thirty-third session on): `sweep NAME ARGS...`
# runs `evo sweep ARGS --out $OUT/NAME.jsonl` for at most $S seconds, continuing $CONTINUE/NAME.jsonl
# when one is there, and prints how far it got.
sweep() {
  local name=$1; shift
  [ -f "$CONTINUE/$name.jsonl" ] && cp "$CONTINUE/$name.jsonl" "$OUT/$name.jsonl"
  local start=$(date +%s)
  timeout "$S" "$E" sweep "$@" --out "$OUT/$name.jsonl" < /dev/null > "$OUT/$name.log" 2>&1
  echo "== $name: rc $?, $(( $(date +%s) - start )) s, $(( $(wc -l < "$OUT/$name.jsonl") - 1 )) configurations"
  tail -3 "$OUT/$name.log" | cut -c1-200
}
