"""The peer in rollstat's benchmark: what an expert would hand-write in DuckDB to get
NeMo Gym's task, agent, repeat and across-repeat statistics from a rollouts file.

Reads only the needed JSON fields (explicit column list), then computes mean, max, min,
median, sample std and quartiles of every numeric field per task, per agent, per
(agent, repeat), and across repeats. Usage: python duckdb_profile.py ROLLOUTS.jsonl
"""
import sys
import time

import duckdb

path = sys.argv[1]
con = duckdb.connect()
t0 = time.time()
con.execute(
    f"""
    CREATE TABLE r AS
    SELECT _ng_task_index AS task, _ng_rollout_index AS rollout,
           coalesce(agent_ref.name, 'agent') AS agent, coalesce(mask_sample, false) AS masked,
           CAST(reward AS DOUBLE) AS reward, CAST(question_id AS DOUBLE) AS question_id,
           CAST(difficulty AS DOUBLE) AS difficulty, verifier_score, CAST(num_steps AS DOUBLE) AS num_steps,
           CAST(terminated AS DOUBLE) AS terminated, CAST(truncated AS DOUBLE) AS truncated,
           library_reward,
           CAST(response.usage.input_tokens AS DOUBLE) AS input_tokens,
           CAST(response.usage.output_tokens AS DOUBLE) AS output_tokens,
           CAST(response.usage.total_tokens AS DOUBLE) AS total_tokens
    FROM read_json('{path}', format = 'newline_delimited', columns = {{
        _ng_task_index: 'BIGINT', _ng_rollout_index: 'BIGINT', agent_ref: 'STRUCT(name VARCHAR)',
        mask_sample: 'BOOLEAN', reward: 'DOUBLE', question_id: 'BIGINT', difficulty: 'BIGINT',
        verifier_score: 'DOUBLE', num_steps: 'BIGINT', terminated: 'BOOLEAN', truncated: 'BOOLEAN',
        library_reward: 'DOUBLE',
        response: 'STRUCT(usage STRUCT(input_tokens BIGINT, output_tokens BIGINT, total_tokens BIGINT))'
    }})
    """
)
t1 = time.time()
fields = ["reward", "question_id", "difficulty", "verifier_score", "num_steps", "terminated",
          "truncated", "library_reward", "input_tokens", "output_tokens", "total_tokens"]


def stats(prefix=""):
    return ", ".join(
        f"avg({f}) AS {prefix}mean_{f}, max({f}) AS {prefix}max_{f}, min({f}) AS {prefix}min_{f}, "
        f"median({f}) AS {prefix}median_{f}, stddev_samp({f}) AS {prefix}std_{f}"
        for f in fields
    )


quart = ", ".join(
    f"quantile_cont({f}, 0.25) AS p25_{f}, quantile_cont({f}, 0.75) AS p75_{f}, count({f}) AS n_{f}" for f in fields
)
n_task = con.execute(f"SELECT count(*) FROM (SELECT agent, task, {stats()} FROM r WHERE NOT masked GROUP BY agent, task)").fetchone()
n_agent = con.execute(f"SELECT count(*) FROM (SELECT agent, {stats()} FROM r WHERE NOT masked GROUP BY agent)").fetchone()
con.execute(
    f"CREATE TABLE rep AS SELECT agent, rollout, count(DISTINCT task) AS sample_count, {stats()}, {quart} "
    "FROM r WHERE NOT masked GROUP BY agent, rollout"
)
across = ", ".join(
    f"avg(mean_{f}), median(mean_{f}), stddev_samp(mean_{f}), min(mean_{f}), max(mean_{f})" for f in fields
)
n_across = con.execute(f"SELECT count(*) FROM (SELECT agent, {across} FROM rep GROUP BY agent)").fetchone()
t2 = time.time()
print(f"read {t1 - t0:.2f}s, statistics {t2 - t1:.2f}s, tasks {n_task[0]}, agents {n_agent[0]}, across {n_across[0]}")
