#!/usr/bin/env bash
# The distributed merge on the 10M-rollout benchmark sweep (docs/performance.md), timed.
#
#   bash benches/merge10m.sh DIR=BINARY [DIR=BINARY...]
#
# Each BINARY merges the slices in the DIR it is paired with, so binaries whose slice
# formats differ (a binary reads only its own format) each get their own DIR; binaries
# that share a format may share one (`d=old d=new`). Each DIR is prepared once, with the
# first BINARY paired with it (each step is skipped when its output is there):
#   gen/    `generate` seed 4242, 2,000,000 tasks x 5 repeats, 1% missing, 1% masked
#           (9,900,080 rollouts, 25.4 GB; inputs 4.42 GB)
#   s/r<i>/ `shard --task-width 25000 --range` of the rollouts as 10 byte ranges
#   s/i<j>/ `shard --inputs` of the inputs as 4 byte ranges, the same width
#   q/      `partial` per bucket: b<k>.slice (rollout slices in range order) and
#           i<k>.slice (input slices in range order); 80 buckets
# then deletes gen/rollouts.jsonl before the next DIR is prepared (so preparing needs
# about 31 GB free). The inputs stay: `merge profile` reads its samples from the file the
# input slices name, by absolute path, at the size it had when sharded; so every DIR has
# its own. Every DIR is generated with the same flags and seed (the script stops if two
# DIRs' inputs differ in size), so every run of one command should give the same bytes.
#
# Then ROUNDS rounds (default 2); in each, every case runs once per pair, the pairs
# alternating case by case (their order reversed every other round):
#   aggregate      merge aggregate SLICES --out F
#   aggregate-lm   the same with --low-memory
#   profile        merge profile --allow-partial SLICES --out-dir D
#   profile-lm     the same with --low-memory
# under /usr/bin/time. The -lm cases run only for a binary whose `merge aggregate --help`
# lists --low-memory (newer binaries keep it as a hidden no-op). Before each run the
# script waits, up to LOAD_WAIT seconds (default 180; 0 waits not), for the 1-minute
# load to fall below LOAD_MAX (default 1.5). Each output is checksummed (b3sum, else
# cksum: CRC and size; for profile, a checksum of the per-file checksums) and deleted
# before the next run, so at most one output (8.8 GB aggregate, 6.3 GB profile) is on
# disk at a time, in the first DIR's out/. One line per run: binary, case, wall, peak
# RSS, checksum, 1-minute load when the run started (and how long it waited for it) and
# when it ended (a run of the merge alone takes it toward the core count). A
# case whose flag a binary does not take prints "unsupported". Lines also go to the
# first DIR's results.txt, each run's stdout/stderr to its DIR's logs/. TASKS=N (default
# 2000000) prepares a smaller sweep, for trying the script out in other DIRs.
set -euo pipefail
usage="usage: merge10m.sh DIR=BINARY [DIR=BINARY...]"
[ $# -ge 1 ] || { echo "$usage" >&2; exit 2; }
dirs=(); bins=()
for a in "$@"; do
  case $a in *=?*) ;; *) echo "$usage (not DIR=BINARY: $a)" >&2; exit 2 ;; esac
  d=${a%%=*}; b=${a#*=}
  [ -x "$b" ] || { echo "$b: not an executable" >&2; exit 2; }
  mkdir -p "$d"; dirs+=("$(cd "$d" && pwd)"); bins+=("$b")
done
rounds=${ROUNDS:-2}; loadmax=${LOAD_MAX:-1.5}; loadwait=${LOAD_WAIT:-180}
tasks=${TASKS:-2000000}; width=25000; rranges=10; iranges=4
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.1f", b - a}'; }
say() { echo "[$(date +%T)] $*" >&2; }

# START:END offsets cutting a file of $1 bytes into $2 ranges (the last open-ended).
ranges() { local i; for ((i = 0; i < $2; i++)); do
  if ((i == $2 - 1)); then echo "$(($1 * i / $2)):"; else echo "$(($1 * i / $2)):$(($1 * (i + 1) / $2))"; fi; done; }
# Bucket numbers of the PREFIX<k>.slice files in the given folders, in numeric order.
buckets() { local p=$1; shift; find "$@" -maxdepth 1 -name "$p*.slice" -printf '%f\n' |
  sed "s/^$p//; s/\.slice\$//" | sort -n -u; }

# --- preparation -----------------------------------------------------------------------
prepare() {  # prepare DIR BINARY
  local dir=$1 prep=$2 gen=$1/gen q=$1/q s=$1/s prep_start t size i j r p k d ds parts n x
  prep_start=$(now)
  if [ ! -e "$q/.done" ]; then
    if [ ! -e "$gen/.done" ] || [ ! -e "$gen/rollouts.jsonl" ]; then
      t=$(now); say "$dir: generate with $prep"
      "$prep" generate -q --tasks "$tasks" --repeats 5 --agents 1 --seed 4242 \
        --missing-frac 0.01 --masked-frac 0.01 --out-dir "$gen" --force >/dev/null
      touch "$gen/.done"; say "generate: $(since "$t") s"
    fi
    size=$(stat -c %s "$gen/rollouts.jsonl"); i=0
    for r in $(ranges "$size" "$rranges"); do
      if [ ! -e "$s/r$i/.done" ]; then
        t=$(now); rm -rf "$s/r$i"
        "$prep" shard -q "$gen/rollouts.jsonl" --out-dir "$s/r$i" --task-width "$width" --range "$r" >/dev/null
        touch "$s/r$i/.done"; say "shard rollouts --range $r: $(since "$t") s"
      fi
      i=$((i + 1))
    done
    size=$(stat -c %s "$gen/materialized_inputs.jsonl"); j=0
    for r in $(ranges "$size" "$iranges"); do
      if [ ! -e "$s/i$j/.done" ]; then
        t=$(now); rm -rf "$s/i$j"
        "$prep" shard -q --inputs "$gen/materialized_inputs.jsonl" --out-dir "$s/i$j" \
          --task-width "$width" --range "$r" >/dev/null
        touch "$s/i$j/.done"; say "shard --inputs --range $r: $(since "$t") s"
      fi
      j=$((j + 1))
    done
    t=$(now); mkdir -p "$q"
    for p in b i; do
      ds=(); if [ "$p" = b ]; then n=$rranges; x=r; else n=$iranges; x=i; fi
      for i in $(seq 0 $((n - 1))); do ds+=("$s/$x$i"); done
      for k in $(buckets "$p" "${ds[@]}"); do
        [ -e "$q/$p$k.slice" ] && continue
        parts=(); for d in "${ds[@]}"; do [ -e "$d/$p$k.slice" ] && parts+=("$d/$p$k.slice"); done
        "$prep" partial -q "${parts[@]}" --out "$q/$p$k.slice" >/dev/null
      done
    done
    touch "$q/.done"; say "partials: $(since "$t") s"
  fi
  rm -f "$gen/rollouts.jsonl"
  [ -e "$gen/materialized_inputs.jsonl" ] || { echo "$gen/materialized_inputs.jsonl is gone: merge profile needs it" >&2; exit 1; }
  say "$dir prepared in $(since "$prep_start") s; $(du -sh "$dir" | cut -f1)"
}
for x in "${!dirs[@]}"; do
  seen=0; for ((y = 0; y < x; y++)); do [ "${dirs[y]}" = "${dirs[x]}" ] && seen=1; done
  [ "$seen" -eq 1 ] || prepare "${dirs[x]}" "${bins[x]}"
done
isize=$(stat -c %s "${dirs[0]}/gen/materialized_inputs.jsonl")
for d in "${dirs[@]}"; do
  [ "$(stat -c %s "$d/gen/materialized_inputs.jsonl")" = "$isize" ] ||
    { echo "$d and ${dirs[0]} hold different sweeps (inputs differ in size)" >&2; exit 1; }
done

# --- runs ----------------------------------------------------------------------------
res=${dirs[0]}/results.txt; out=${dirs[0]}/out; rm -rf "$out"
if command -v b3sum >/dev/null; then sum() { b3sum --no-names "$1"; }
else sum() { cksum <"$1" | tr ' ' :; }; fi
# Checksum of a file, or of a folder's files (name and checksum of each, in name order).
digest() {
  if [ -d "$1" ]; then (cd "$1" && for f in $(ls); do echo "$f $(sum "$f")"; done) >"$2"; sum "$2"
  else sum "$1" | tee "$2"; fi
}
# The 1-minute load, once it is below LOAD_MAX or LOAD_WAIT seconds have passed.
settle() {
  local load w=0
  load=$(cut -d' ' -f1 /proc/loadavg)
  while ((w < loadwait)) && awk -v l="$load" -v m="$loadmax" 'BEGIN {exit !(l >= m)}'; do
    sleep 10; w=$((w + 10)); load=$(cut -d' ' -f1 /proc/loadavg)
  done
  if ((w > 0)); then echo "$load (waited $w s)"; else echo "$load"; fi
}
cases=(aggregate aggregate-lm profile profile-lm)
run() {  # run PAIR CASE ROUND
  local dir=${dirs[$1]} bin=${bins[$1]} c=$2 log load end args wall rss rc=0 check slices=() k
  log=$dir/logs/$3-$(basename "$bin")-$c; mkdir -p "$dir/logs"
  # Rollout slices in bucket order, then the input slices.
  for k in $(buckets b "$dir/q"); do slices+=("$dir/q/b$k.slice"); done
  for k in $(buckets i "$dir/q"); do slices+=("$dir/q/i$k.slice"); done
  case $c in
    aggregate) args=(merge aggregate -q "${slices[@]}" --out "$out/aggregate_metrics.json") ;;
    aggregate-lm) args=(merge aggregate -q --low-memory "${slices[@]}" --out "$out/aggregate_metrics.json") ;;
    profile) args=(merge profile -q --allow-partial "${slices[@]}" --out-dir "$out/profile") ;;
    profile-lm) args=(merge profile -q --allow-partial --low-memory "${slices[@]}" --out-dir "$out/profile") ;;
  esac
  rm -rf "$out"; mkdir -p "$out"
  load=$(settle)
  /usr/bin/time -f '%e s %M KB' -o "$log.time" "$bin" "${args[@]}" >"$log.out" 2>"$log.err" || rc=$?
  end=$(cut -d' ' -f1 /proc/loadavg)
  if [ "$rc" -eq 0 ] && [ ! -e "$out/aggregate_metrics.json" ] && [ ! -d "$out/profile" ]; then
    line="FAILED (no output)"; failed=1
  elif [ "$rc" -ne 0 ]; then
    if grep -Eq "unexpected argument|unrecognized|wasn't expected" "$log.err"; then
      line="unsupported"
    else
      line="FAILED (exit $rc: $(grep -v '^Command exited' "$log.err" | tail -1))"; failed=1
    fi
  else
    read -r wall _ rss _ <"$log.time"
    case $c in aggregate*) check=$(digest "$out/aggregate_metrics.json" "$log.sum") ;;
               *) check=$(digest "$out/profile" "$log.sum") ;; esac
    line=$(printf '%8s s %9s KB  %s' "$wall" "$rss" "$check")
    echo "${c%-lm} $check" >>"$sums"
  fi
  rm -rf "$out"
  printf '%-24s %-13s %s  load %s -> %s\n' "$bin" "$c" "$line" "$load" "$end" | tee -a "$res"
}
failed=0; sums=${dirs[0]}/.sums.$$; : >"$sums"
echo "# $(date -Is) $(nproc) cores; ROUNDS=$rounds; $*" | tee -a "$res"
lm=(); for x in "${!bins[@]}"; do
  if "${bins[x]}" merge aggregate --help | grep -q -- --low-memory; then lm+=(1); else lm+=(0)
    echo "# ${bins[x]}: no --low-memory in its help; its -lm cases are skipped" | tee -a "$res"; fi
done
for r in $(seq "$rounds"); do
  order=("${!bins[@]}")
  if [ $((r % 2)) -eq 0 ]; then order=(); for ((x = ${#bins[@]} - 1; x >= 0; x--)); do order+=("$x"); done; fi
  for c in "${cases[@]}"; do
    for x in "${order[@]}"; do
      case $c in *-lm) [ "${lm[x]}" -eq 1 ] || continue ;; esac
      run "$x" "$c" "r$r"
    done
  done
done
# Every run of one command should give the same bytes, with or without --low-memory.
for c in aggregate profile; do
  k=$(awk -v c="$c" '$1 == c {print $2}' "$sums" | sort -u | wc -l)
  echo "$c: $k distinct checksum(s) over $(awk -v c="$c" '$1 == c' "$sums" | wc -l) runs" | tee -a "$res"
  [ "$k" -le 1 ] || failed=1
done
rm -f "$sums"
exit "$failed"
