#!/usr/bin/env bash
# The lake of sweeps, timed.
#
#   bash benches/lake.sh add   BINARY ROLLOUTS.jsonl INPUTS.jsonl [ROUNDS]
#       What adding a sweep to a lake costs over `export` of it: ROUNDS alternating runs of
#       `export --out-dir` and `export --lake` (a fresh lake each time) on one sweep, the
#       median wall time and peak memory of each, and the ratio.
#
#   bash benches/lake.sh many  BINARY DIR [SWEEPS] [TASKS]
#       A lake of SWEEPS generated sweeps (TASKS tasks x 4 repeats x 2 agents each, one
#       task set, labels step=1000..) built in DIR, then `query --lake` (the bundled
#       sweep_leaderboard) and `report --lake --by step`, 5 runs each, beside DuckDB's
#       read of the same leaderboard from the lake's files (the peer a team already has;
#       needs python3 with duckdb: set PYTHON).
#
# Inputs are read once first so every variant starts from a warm page cache.
set -euo pipefail
mode=${1:?add or many}; bin=${2:?binary}
median() { sort -n "$1" | awk -v c="$2" '{v[NR]=$c} END {print v[int((NR+1)/2)]}'; }
times() { tr '\n' ' ' <"$1" | awk '{for(i=1;i<=NF;i+=2) printf "%s ", $i}'; }
case "$mode" in
add)
  rollouts=${3:?rollouts}; inputs=${4:?inputs}; rounds=${5:-5}
  out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
  cat "$rollouts" "$inputs" >/dev/null
  : >"$out/export"; : >"$out/lake"
  for _ in $(seq "$rounds"); do
    rm -rf "$out/t" "$out/l"
    /usr/bin/time -f "%e %M" "$bin" export -q "$rollouts" --inputs "$inputs" --out-dir "$out/t" 2>&1 >/dev/null | tail -1 >>"$out/export"
    /usr/bin/time -f "%e %M" "$bin" export -q "$rollouts" --inputs "$inputs" --lake "$out/l" 2>&1 >/dev/null | tail -1 >>"$out/lake"
  done
  a=$(median "$out/export" 1); b=$(median "$out/lake" 1)
  echo "export --out-dir: median ${a} s, peak $(median "$out/export" 2) KB ($(times "$out/export")s)"
  echo "export --lake:    median ${b} s, peak $(median "$out/lake" 2) KB ($(times "$out/lake")s)"
  awk -v a="$a" -v b="$b" 'BEGIN {printf "adding to a lake costs %+.1f%% over export\n", 100 * (b - a) / a}'
  ;;
many)
  dir=${3:?folder}; sweeps=${4:-50}; tasks=${5:-12500}; py=${PYTHON:-python3}
  mkdir -p "$dir"
  if [ ! -d "$dir/lake/sweeps" ] || [ "$(ls "$dir/lake/sweeps" | wc -l)" -lt "$sweeps" ]; then
    rm -rf "$dir/lake"
    start=$(date +%s.%N)
    for i in $(seq "$sweeps"); do
      "$bin" generate -q --tasks "$tasks" --repeats 4 --agents 2 --fan-out --task-seed 1 --seed "$i" \
        --text-bytes 200 --out-dir "$dir/s" --force >/dev/null
      "$bin" export -q "$dir/s/rollouts.jsonl" --inputs "$dir/s/materialized_inputs.jsonl" --lake "$dir/lake" \
        --sweep-id "step-$((i * 1000))" --label "step=$((i * 1000))" 2>/dev/null >/dev/null
    done
    echo "built $sweeps sweeps of $((tasks * 8)) rollouts in $(echo "$(date +%s.%N) - $start" | bc) s ($(du -sh "$dir/lake" | cut -f1))"
  fi
  out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
  : >"$out/q"; : >"$out/r"; : >"$out/d"
  for _ in 1 2 3 4 5; do
    /usr/bin/time -f "%e %M" "$bin" query -q --lake "$dir/lake" sweep_leaderboard --format csv --out "$out/q.csv" 2>&1 >/dev/null | tail -1 >>"$out/q"
    /usr/bin/time -f "%e %M" "$bin" report -q --lake "$dir/lake" --by step --out "$out/t.html" 2>&1 >/dev/null | tail -1 >>"$out/r"
    if "$py" -c "import duckdb" 2>/dev/null; then
      /usr/bin/time -f "%e %M" "$py" - "$dir/lake" <<'PY' 2>&1 >/dev/null | tail -1 >>"$out/d"
import sys, duckdb
lake = sys.argv[1]
duckdb.sql(f"""SELECT agent, sweep, COALESCE("mean_across_repeats/mean/reward", "mean/reward") AS mean_reward,
  "ci_low_95_across_repeats/mean/reward" AS ci_low, "ci_high_95_across_repeats/mean/reward" AS ci_high
  FROM read_parquet('{lake}/agents/*/*.parquet', hive_partitioning = true, union_by_name = true,
                    hive_types = {{'sweep': VARCHAR}}) ORDER BY agent, sweep""").fetchall()
PY
    fi
  done
  echo "query --lake sweep_leaderboard: median $(median "$out/q" 1) s, peak $(median "$out/q" 2) KB ($(times "$out/q")s)"
  echo "report --lake --by step:        median $(median "$out/r" 1) s, peak $(median "$out/r" 2) KB ($(times "$out/r")s)"
  if [ -s "$out/d" ]; then
    echo "DuckDB, the same leaderboard:   median $(median "$out/d" 1) s, peak $(median "$out/d" 2) KB ($(times "$out/d")s)"
  fi
  ;;
esac
