-- Tasks by how often each run solved them: per agent, the tasks never solved (no
-- measured rollout reached a reward of 0.5), sometimes solved, and always solved (every
-- measured rollout did), with the count and the task indexes of each, in task order.
-- `rollstat view` counts its overview's slices by the same rule.
SELECT agent,
       slice,
       COUNT(*) AS tasks,
       ARRAY_TO_STRING(ARRAY_AGG(_ng_task_index ORDER BY _ng_task_index), ',') AS task_indexes
FROM (
    SELECT agent,
           _ng_task_index,
           CASE WHEN "max/reward" < 0.5 THEN 'never'
                WHEN "min/reward" >= 0.5 THEN 'always'
                ELSE 'sometimes' END AS slice
    FROM tasks
    WHERE "max/reward" IS NOT NULL
)
GROUP BY agent, slice
ORDER BY agent, slice
