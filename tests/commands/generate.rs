//! `rollstat generate`: seeded, deterministic sweeps in NeMo Gym's format.

use crate::common::*;

#[test]
fn generate_is_deterministic_and_thread_independent() {
    let a = TempDir::new("gen-a");
    let b = TempDir::new("gen-b");
    let args = [
        "--tasks",
        "60",
        "--repeats",
        "3",
        "--agents",
        "3",
        "--seed",
        "5",
        "--missing-frac",
        "0.05",
        "--masked-frac",
        "0.05",
        "--fan-out",
    ];
    let mut a1 = vec!["--threads", "1"];
    a1.extend_from_slice(&args);
    let mut a2 = vec!["--threads", "2"];
    a2.extend_from_slice(&args);
    // --threads is global: put it before the subcommand.
    let o = run(&[&["--threads", "1", "generate", "--out-dir", a.path().to_str().unwrap()][..], &args[..]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&[&["--threads", "2", "generate", "--out-dir", b.path().to_str().unwrap()][..], &args[..]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    for f in ["rollouts.jsonl", "materialized_inputs.jsonl"] {
        assert_eq!(std::fs::read(a.join(f)).unwrap(), std::fs::read(b.join(f)).unwrap(), "{f} differs across threads");
    }
    let inputs = std::fs::read_to_string(a.join("materialized_inputs.jsonl")).unwrap();
    assert_eq!(inputs.lines().count(), 60 * 3 * 3);
    let rollouts = std::fs::read_to_string(a.join("rollouts.jsonl")).unwrap();
    let n = rollouts.lines().count();
    assert!(n < 540 && n > 480, "missing fraction off: {n}");
    for l in rollouts.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert!(v["_ng_task_index"].is_i64() && v["_ng_rollout_index"].is_i64());
    }
}
