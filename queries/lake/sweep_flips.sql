-- Tasks that flipped between one sweep and the next (in the lake's order, oldest first),
-- per run: solved in one and not in the other, where a task is solved when its mean
-- reward is at least 0.5 (most of its repeats pass). Tasks are paired on their
-- fingerprint (what the task asks), wherever each sweep put them.
SELECT b.agent AS agent,
       a.sweep AS from_sweep,
       b.sweep AS to_sweep,
       b.task_fingerprint AS task_fingerprint,
       a._ng_task_index AS from_task,
       b._ng_task_index AS to_task,
       a."mean/reward" AS from_mean_reward,
       b."mean/reward" AS to_mean_reward,
       CASE WHEN b."mean/reward" >= 0.5 THEN 'fixed' ELSE 'broken' END AS flip
FROM tasks a
JOIN tasks b ON a.agent = b.agent AND a.task_fingerprint = b.task_fingerprint
WHERE b.sweep_order = a.sweep_order + 1
  AND ((a."mean/reward" >= 0.5 AND b."mean/reward" < 0.5) OR (a."mean/reward" < 0.5 AND b."mean/reward" >= 0.5))
ORDER BY b.sweep_order, agent, flip, task_fingerprint
