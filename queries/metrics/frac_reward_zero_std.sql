-- frac_reward_zero_std: share of an agent's tasks whose measured rewards do not vary
-- (max = min, including one-rollout tasks). GRPO-style advantages are zero on such
-- tasks, so training learns nothing from them; `tasks` is how many tasks were counted.
WITH per_task AS (
    SELECT agent, _ng_task_index,
           MAX(CAST(reward AS DOUBLE)) AS hi, MIN(CAST(reward AS DOUBLE)) AS lo
    FROM rollouts
    WHERE NOT mask_sample AND reward IS NOT NULL
    GROUP BY agent, _ng_task_index
)
SELECT agent,
       AVG(CASE WHEN hi = lo THEN 1.0 ELSE 0.0 END) AS value,
       COUNT(*) AS tasks
FROM per_task
GROUP BY agent
ORDER BY agent
