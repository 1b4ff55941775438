"""Interoperability check run by .ci/run: the Parquet tables rollstat writes open in
pyarrow and DuckDB with the documented column names and types.

Usage: python check_parquet.py TABLES_DIR
"""
import sys

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

d = sys.argv[1]
passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAILED: {what}")


r = pq.read_table(f"{d}/rollouts.parquet")
s = r.schema
check(s.field("_ng_task_index").type == pa.int64(), "rollouts._ng_task_index is int64")
check(s.field("_ng_rollout_index").type == pa.int64(), "rollouts._ng_rollout_index is int64")
check(pa.types.is_string(s.field("agent").type) or pa.types.is_large_string(s.field("agent").type)
      or pa.types.is_string_view(s.field("agent").type), "rollouts.agent is a string")
check(s.field("mask_sample").type == pa.bool_(), "rollouts.mask_sample is bool")
check(s.field("reward").type in (pa.float64(), pa.int64()), "rollouts.reward is numeric")
check(s.field("output_tokens").type == pa.int64(), "rollouts.output_tokens is int64")
check(r.column("extracted_answer").null_count > 0, "null answers stay null")

t = pq.read_table(f"{d}/tasks.parquet")
for c in ["agent", "_ng_task_index", "mean/reward", "num_rollouts"]:
    check(c in t.column_names, f"tasks.{c} exists")
check(t.schema.field("mean/reward").type == pa.float64(), "tasks.mean/reward is float64")
a = pq.read_table(f"{d}/agents.parquet")
check("num_repeats" in a.column_names and "mean/reward" in a.column_names, "agents columns")
rp = pq.read_table(f"{d}/repeats.parquet")
check("ci_low_95/reward" in rp.column_names, "repeats.ci_low_95/reward exists")

con = duckdb.connect()
n, agents = con.execute(
    f"SELECT count(*), count(DISTINCT agent) FROM read_parquet('{d}/rollouts.parquet')"
).fetchone()
check(n == r.num_rows and agents == a.num_rows, "DuckDB reads rollouts.parquet")
m = con.execute(
    f"""SELECT max(abs(a."mean/reward" - b.m)) FROM read_parquet('{d}/agents.parquet') a
        JOIN (SELECT agent, avg(CAST(reward AS DOUBLE)) AS m FROM read_parquet('{d}/rollouts.parquet')
              WHERE NOT mask_sample GROUP BY agent) b USING (agent)"""
).fetchone()[0]
check(m is not None and m < 1e-12, "agents.mean/reward equals DuckDB's mean over rollouts")
# `compare --format parquet`: one row per run; each run's mean is the mean over tasks of
# the task's mean reward (measured rollouts), as DuckDB computes it from the rollouts table.
c = pq.read_table(f"{d}/compare.parquet")
for col in ["run", "statistic", "tasks", "mean", "se", "ci_low_95", "diff", "p_value"]:
    check(col in c.column_names, f"compare.{col} exists")
check(c.schema.field("tasks").type == pa.int64(), "compare.tasks is int64")
m = con.execute(
    f"""SELECT max(abs(c.mean - t.m)) FROM read_parquet('{d}/compare.parquet') c
        JOIN (SELECT agent, avg(tm) AS m FROM (
                SELECT agent, _ng_task_index, avg(CAST(reward AS DOUBLE)) AS tm
                FROM read_parquet('{d}/rollouts.parquet')
                WHERE NOT mask_sample AND reward IS NOT NULL GROUP BY ALL) GROUP BY agent) t
        ON c.run = t.agent"""
).fetchone()[0]
check(m is not None and m < 1e-12, "compare.mean equals DuckDB's mean of task means")
print(f"interop: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
