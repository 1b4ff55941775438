-- Hardest tasks: the 20 (agent, task) pairs with the lowest mean reward, with how many
-- rollouts each rests on.
SELECT agent, _ng_task_index, "mean/reward" AS mean_reward, num_rollouts
FROM tasks
ORDER BY mean_reward ASC, agent, _ng_task_index
LIMIT 20
