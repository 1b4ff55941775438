-- pass_at_1: percentage of an agent's tasks solved on average by one rollout — the
-- mean over tasks of the task's mean reward, times 100 (NeMo Gym's pass@1[avg-of-n]
-- for rewards in [0, 1]).
WITH per_task AS (
    SELECT agent, _ng_task_index, AVG(CAST(reward AS DOUBLE)) AS m
    FROM rollouts
    WHERE NOT mask_sample AND reward IS NOT NULL
    GROUP BY agent, _ng_task_index
)
SELECT agent, 100.0 * AVG(m) AS value
FROM per_task
GROUP BY agent
ORDER BY agent
