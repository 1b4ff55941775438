#!/usr/bin/env bash
# What the rollout health check adds to `rollstat aggregate`: ROUNDS alternating runs
# of `aggregate -q` with and without `--no-health-check` on one rollouts file, the
# median wall time and peak memory of each, and the ratio.
#
#   bash benches/health_check.sh BINARY ROLLOUTS.jsonl [ROUNDS]
#
# The file is read once first so both variants start from a warm page cache.
set -euo pipefail
bin=${1:?binary}; rollouts=${2:?rollouts file}; rounds=${3:-7}
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
cat "$rollouts" >/dev/null
run() { /usr/bin/time -f "%e %M" "$bin" aggregate -q "$rollouts" --out "$out/agg.json" "$@" 2>&1 >/dev/null | tail -1; }
: >"$out/with"; : >"$out/without"
for _ in $(seq "$rounds"); do
  run --no-health-check >>"$out/without"
  run >>"$out/with"
done
median() { sort -n "$1" | awk -v c="$2" '{v[NR]=$c} END {print v[int((NR+1)/2)]}'; }
a=$(median "$out/without" 1); b=$(median "$out/with" 1)
ma=$(median "$out/without" 2); mb=$(median "$out/with" 2)
echo "aggregate --no-health-check: median ${a} s, peak ${ma} KB ($(tr '\n' ' ' <"$out/without" | awk '{for(i=1;i<=NF;i+=2) printf "%s ", $i}')s)"
echo "aggregate (health check):    median ${b} s, peak ${mb} KB ($(tr '\n' ' ' <"$out/with" | awk '{for(i=1;i<=NF;i+=2) printf "%s ", $i}')s)"
awk -v a="$a" -v b="$b" 'BEGIN {printf "the health check adds %.1f%% to the wall time\n", 100 * (b - a) / a}'
