# Issue 15, thirty-fifth session: each side-by-side re-timing of the searches in
# out/searches_{before,after}.tgz (made by searches.sh), one line per candidate: its knobs, the
# mean of its timings, and each timing as us / mean MHz / k SM cycles. Runs here (sqlite3).
set -eu
for set in before after; do
  work=$(mktemp -d); tar xzf .device/s35/out/searches_$set.tgz -C $work
  for db in $work/runs/work/search*.db; do
    echo "== $set $(basename $db)"
    sqlite3 $db "select t.candidate_id, printf('%.1f', avg(t.median_us)),
      group_concat(printf('%.1f/%.0f/%.0fk', t.median_us,
        json_extract(t.timing_json, '$.mean_sm_clock_mhz'),
        t.median_us * json_extract(t.timing_json, '$.mean_sm_clock_mhz') / 1000), '  '),
      (select 'BLOCK_N=' || json_extract(genome, '$.BLOCK_N') || ' SWS=' ||
        json_extract(genome, '$.SOFTMAX_WARP_SYNC') || ' STREAM_K=' || json_extract(genome, '$.STREAM_K')
        || ' RUQ=' || json_extract(genome, '$.RESCALE_UNDER_QK') || ' PR=' ||
        json_extract(genome, '$.PRODUCER_REGS') from candidates c where c.id = t.candidate_id)
      from retiming_timings t group by t.candidate_id"
  done
  rm -rf $work
done
