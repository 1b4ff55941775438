#!/usr/bin/env python3
"""End to end on a local multi-node Ray cluster: `python -m rollstat.ray` (the driver of
the installed rollstat package, whose tasks run the package's own command: no binary
path is passed) over a sweep cut into 5 files gives the bytes of single-machine
`rollstat aggregate` and `profile` on the files concatenated, also when one join
task's first attempt fails.

    python tests/python/check_ray.py ROLLSTAT_BINARY [ROLLOUTS_PER_SWEEP]

ROLLSTAT_BINARY (the cargo-built binary) makes the sweep and the reference bytes.
"""

import os
import random
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DRIVER = ["-m", "rollstat.ray"]


def run(*args, env=None):
    p = subprocess.run(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"FAILED ({p.returncode}): {' '.join(args)}\n{p.stderr}")
    return p


def same(a, b, what):
    with open(a, "rb") as x, open(b, "rb") as y:
        if x.read() != y.read():
            sys.exit(f"FAILED: {what}: {a} and {b} differ")
    print(f"ok: {what}: identical bytes")


def make_sweep(binary, work, generate_args, files, seed):
    """Generates a sweep into `work`, shuffles its rollouts and cuts them into `files`
    files at random points; the single-machine artifacts of the files concatenated are the
    reference. Returns (inputs, files, reference aggregate, reference profile folder)."""
    gen = os.path.join(work, "gen")
    run(binary, "generate", *generate_args, "--out-dir", gen, "-q")
    inputs = os.path.join(gen, "materialized_inputs.jsonl")
    with open(os.path.join(gen, "rollouts.jsonl")) as f:
        lines = f.readlines()
    rng = random.Random(seed)
    rng.shuffle(lines)
    cuts = sorted(rng.sample(range(1, len(lines)), files - 1))
    parts = []
    for k, (a, b) in enumerate(zip([0] + cuts, cuts + [len(lines)])):
        parts.append(os.path.join(work, f"part{k}.jsonl"))
        with open(parts[-1], "w") as f:
            f.writelines(lines[a:b])
    everything = os.path.join(work, "all.jsonl")
    with open(everything, "w") as f:
        f.writelines(lines)
    del lines
    want_agg = os.path.join(work, "want.json")
    run(binary, "aggregate", everything, "--inputs", inputs, "--out", want_agg, "-q")
    want_prof = os.path.join(work, "want-prof")
    run(binary, "profile", "--rollouts", everything, "--inputs", inputs, "--out-dir", want_prof, "--allow-partial", "-q")
    return inputs, parts, want_agg, want_prof


def check_stats(stderr, shards, max_buckets):
    """--stats names each stage with its task count, times and a real peak memory."""
    got = {}
    for m in re.finditer(r"rollstat_ray: (\w+) +(\d+) tasks? +([\d.]+) s +slowest task +([\d.]+) s"
                         r" +peak task memory +([\d.]+) MB", stderr):
        got[m.group(1)] = (int(m.group(2)), float(m.group(3)), float(m.group(4)), float(m.group(5)))
    # The merge goes bucket by bucket, so its statistics run as rounds: a share task per
    # bucket of rollouts and one combine task each (counting, sums, deviations at least).
    rounds = sorted(k for k in got if re.fullmatch(r"round\d+", k))
    if set(got) - set(rounds) != {"shard", "join", "merge"} or len(rounds) < 3:
        sys.exit(f"FAILED: --stats printed stages {sorted(got)}:\n{stderr}")
    buckets = got["join"][0]
    if got["shard"][0] != shards or not 2 <= buckets <= max_buckets or got["merge"][0] != 1:
        sys.exit(f"FAILED: --stats task counts {got}")
    if any(not 2 <= got[r][0] <= buckets + 1 for r in rounds):
        sys.exit(f"FAILED: --stats round task counts {got}")
    for stage, (_, wall, slowest, peak) in got.items():
        # A rollstat process maps its binary and reads a file: more than 1 MB, less than
        # the machine; the slowest task cannot outlast its stage.
        if not 1.0 < peak < 64_000 or slowest > wall + 0.01:
            sys.exit(f"FAILED: --stats {stage}: {got[stage]}")
    if not re.search(r"rollstat_ray: total [\d.]+ s, driver peak memory [\d.]+ MB", stderr):
        sys.exit(f"FAILED: --stats printed no total:\n{stderr}")
    print(f"ok: --stats: {', '.join(f'{k} {v[0]} tasks, peak {v[3]:.0f} MB' for k, v in got.items())}")


def same_profile(got_dir, want_dir):
    """The three profile artifacts of the sweep `all.jsonl` are identical."""
    for f in ["all_reward_profiling.jsonl", "all_agent_metrics.json", "all_repeat_level_metrics.json"]:
        same(os.path.join(got_dir, f), os.path.join(want_dir, f), f"profile {f}")


def refuses_bad_input(driver, work, first, flags):
    """The driver given a rollouts file with a bad line (after `first`) exits 2, names
    the file and line, and writes no output."""
    bad = os.path.join(work, "bad.jsonl")
    with open(bad, "w") as f:
        f.write('{"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1}\n{"_ng_task_index": 1, "reward": }\n')
    got_bad = os.path.join(work, "bad.json")
    p = subprocess.run([sys.executable, *driver, "aggregate", "--rollouts", first, bad, "--out", got_bad, *flags],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 2 or "bad.jsonl, line 2" not in p.stderr or os.path.exists(got_bad):
        sys.exit(f"FAILED: bad input gave exit {p.returncode}, stderr {p.stderr!r}")
    print("ok: bad input refused (exit 2, file and line named, no output)")


def main():
    binary = os.path.abspath(sys.argv[1])
    rollouts = int(sys.argv[2]) if len(sys.argv) > 2 else 60000
    from ray.cluster_utils import Cluster

    work = tempfile.mkdtemp(prefix="rollstat-check-ray-")
    generate = ["--tasks", str(rollouts // 4), "--repeats", "4", "--agents", "2", "--seed", "17", "--masked-frac",
                "0.02", "--missing-frac", "0.02", "--ng-perf-frac", "0.2", "--text-bytes", "200"]
    inputs, files, want_agg, want_prof = make_sweep(binary, work, generate, 5, seed=5)

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    for _ in range(2):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    print(f"ray cluster: 3 nodes at {cluster.address}")
    try:
        env = dict(os.environ)
        got_agg = os.path.join(work, "got.json")
        p = run(sys.executable, *DRIVER, "aggregate", "--rollouts", *files, "--inputs", inputs, "--out", got_agg,
                "--address", cluster.address, "--buckets", "7", "--stats", env=env)
        same(got_agg, want_agg, "aggregate over 5 files, 3 nodes")
        # Five rollouts files and the inputs file; each bucket's rollouts and inputs joined.
        check_stats(p.stderr, shards=6, max_buckets=14)
        # The statistics run as rounds of share tasks on the cluster and the merge takes
        # the finished plan. The first attempt of one join task and of one summing
        # share task fail: the retries give the same bytes.
        for fail in ["join:2", "share1:2"]:
            env["ROLLSTAT_RAY_FAIL_ONCE"] = fail
            got_retry = os.path.join(work, f"got-retry-{fail[:5]}.json")
            p = run(sys.executable, *DRIVER, "aggregate", "--rollouts", os.path.join(work, "part*.jsonl"), "--inputs",
                    "file://" + inputs, "--out", got_retry, "--address", cluster.address,
                    "--buckets", "5", "--stats", env=env)
            same(got_retry, want_agg, f"aggregate in rounds, {fail} failed once and retried")
            rounds = re.findall(r"rollstat_ray: round(\d+)", p.stderr)
            if len(rounds) < 3:
                sys.exit(f"FAILED: expected counting, summing and deviation rounds, got {p.stderr!r}")
        del env["ROLLSTAT_RAY_FAIL_ONCE"]
        got_prof = os.path.join(work, "got-prof")
        # Files larger than --split-bytes: the profile run shards them (and the inputs) as
        # byte ranges; its statistics run as rounds on the cluster.
        assert sum(os.path.getsize(f) > 8_000_000 for f in files) >= 2, [os.path.getsize(f) for f in files]
        p = run(sys.executable, *DRIVER, "profile", "--rollouts", *files, "--name", "all.jsonl", "--inputs", inputs,
                "--allow-partial", "--out-dir", got_prof, "--address", cluster.address,
                "--buckets", "6", "--split-bytes", "4000000", "--stats", env=env)
        if len(re.findall(r"rollstat_ray: round(\d+)", p.stderr)) < 3:
            sys.exit(f"FAILED: profile ran no statistics rounds: {p.stderr!r}")
        same_profile(got_prof, want_prof)
        refuses_bad_input(DRIVER, work, files[0], ["--address", cluster.address])
        # The Python entry point of the same driver.
        import rollstat.ray

        got_api = os.path.join(work, "got-api.json")
        rollstat.ray.aggregate(files, inputs=inputs, out=got_api, address=cluster.address, buckets=4,
                               whole_table=True)
        same(got_api, want_agg, "rollstat.ray.aggregate(whole_table=True) from Python")
    finally:
        cluster.shutdown()
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
