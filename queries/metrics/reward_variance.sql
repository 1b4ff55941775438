-- reward_variance: VAGEN's reward variance, over rollouts. For each task (the group),
-- the population variance (ddof 0) of the rewards of the agent's measured rollouts — 0
-- for a task with one rollout — then the mean over the agent's tasks. Agrees with the
-- built-in `--metric reward_variance`.
WITH per_task AS (
    SELECT agent, _ng_task_index, AVG(CAST(reward AS DOUBLE)) AS m
    FROM rollouts
    WHERE NOT mask_sample AND reward IS NOT NULL
    GROUP BY agent, _ng_task_index
),
dev AS (
    SELECT r.agent AS agent, r._ng_task_index AS task,
           AVG((CAST(r.reward AS DOUBLE) - p.m) * (CAST(r.reward AS DOUBLE) - p.m)) AS v
    FROM rollouts r
    JOIN per_task p ON r.agent = p.agent AND r._ng_task_index = p._ng_task_index
    WHERE NOT r.mask_sample AND r.reward IS NOT NULL
    GROUP BY r.agent, r._ng_task_index
)
SELECT agent, AVG(v) AS value
FROM dev
GROUP BY agent
ORDER BY agent
