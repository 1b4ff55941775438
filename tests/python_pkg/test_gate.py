"""`rollstat gate`'s one-sided p-values and TOST against scipy and statsmodels, on task
means computed here from the rollout lines."""

import json
import math

from conftest import need, run


def task_means(path):
    """Per task: the mean reward of its measured rollouts (not masked, numeric)."""
    values = {}
    with open(path) as f:
        for line in f:
            row = json.loads(line)
            r = row.get("reward")
            if row.get("mask_sample") is True or not isinstance(r, (int, float)):
                continue
            values.setdefault(row["_ng_task_index"], []).append(float(r))
    return {t: math.fsum(v) / len(v) for t, v in values.items()}


def gate_json(tmp_path, policy, base, cand):
    p = tmp_path / "gate.toml"
    p.write_text(policy)
    out = run("gate", "--policy", p, "--rollouts", base, "--rollouts", cand, "--format", "json", check=False)
    assert out.returncode in (0, 3, 4), out.stderr
    return json.loads(out.stdout)


def test_one_sided_p_values_and_tost_match_scipy_and_statsmodels(tmp_path):
    np = need("numpy")
    stats = need("scipy.stats")
    weightstats = need("statsmodels.stats.weightstats")
    files = []
    for seed in (5, 6):
        d = tmp_path / f"s{seed}"
        run("generate", "-q", "--tasks", 90, "--repeats", 3, "--agents", 1, "--task-seed", 2, "--seed", seed,
            "--reward", "continuous", "--masked-frac", 0.03, "--out-dir", d)
        files.append(tmp_path / f"run{seed}.jsonl")
        files[-1].write_bytes((d / "rollouts.jsonl").read_bytes())
    base, cand = files
    policy = """
[[check]]
name = "sup"
metric = "reward"
kind = "superiority"
margin = 0.01

[[check]]
name = "ni"
metric = "reward"
kind = "non_inferiority"
margin = 0.03

[[check]]
name = "ni lower"
metric = "reward"
kind = "non_inferiority"
direction = "lower"
margin = 0.04

[[check]]
name = "eq"
metric = "reward"
kind = "equivalence"
margin = 0.05

[[check]]
name = "floor"
metric = "reward"
kind = "threshold"
min = 0.4
max = 0.7
"""
    g = gate_json(tmp_path, policy, base, cand)
    checks = {c["name"]: c for c in g["checks"]}
    a, b = task_means(base), task_means(cand)
    shared = sorted(set(a) & set(b))
    x = np.array([a[t] for t in shared])
    y = np.array([b[t] for t in shared])
    d = y - x
    assert checks["sup"]["tasks"] == len(shared)
    want = {
        "sup": stats.ttest_1samp(d, 0.01, alternative="greater").pvalue,
        "ni": stats.ttest_1samp(d, -0.03, alternative="greater").pvalue,
        "ni lower": stats.ttest_1samp(d, 0.04, alternative="less").pvalue,
        "eq": weightstats.ttost_paired(y, x, -0.05, 0.05)[0],
        "floor": max(stats.ttest_1samp(y, 0.4, alternative="greater").pvalue,
                     stats.ttest_1samp(y, 0.7, alternative="less").pvalue),
    }
    for name, p in want.items():
        got = checks[name]["p"]
        assert math.isclose(got, p, rel_tol=1e-9, abs_tol=1e-300), (name, got, p)
    # The reported interval is the 90% one these tests compare with the margins.
    res = stats.ttest_1samp(d, 0.0)
    lo, hi = res.confidence_interval(0.9)
    assert math.isclose(checks["ni"]["ci_low"], lo, rel_tol=1e-9, abs_tol=1e-12)
    assert math.isclose(checks["ni"]["ci_high"], hi, rel_tol=1e-9, abs_tol=1e-12)
    assert g["ci_level"] == 0.9


def test_the_api_gives_the_commands_decision(runs, tmp_path):
    import pytest
    import rollstat

    p = tmp_path / "gate.toml"
    p.write_text('[[check]]\nmetric = "reward"\nkind = "non_inferiority"\nmargin = 0.05\n')
    out = run("gate", "--policy", p, *runs, "--format", "json", check=False)
    g = rollstat.gate(p, runs)
    assert g.data == json.loads(out.stdout)
    assert (g.verdict, g.exit_status) == (g.data["verdict"], out.returncode)
    assert g.checks[0]["kind"] == "non_inferiority" and g.ci_level == 0.9
    p.write_text('[[check]]\nmetric = "reward"\nkind = "sideways"\n')
    with pytest.raises(rollstat.InputError) as e:
        rollstat.gate(p, runs)
    assert (e.value.line, e.value.key) == (3, "kind")
