-- mean_reward_by_subset: mean reward of an agent's measured rollouts per value of the
-- `subset` field (rollouts without a subset are left out), one column per subset seen
-- in the data: easy, medium, hard. Edit the list to match your subsets.
SELECT agent,
       AVG(CASE WHEN subset = 'easy' THEN CAST(reward AS DOUBLE) END) AS easy,
       AVG(CASE WHEN subset = 'medium' THEN CAST(reward AS DOUBLE) END) AS medium,
       AVG(CASE WHEN subset = 'hard' THEN CAST(reward AS DOUBLE) END) AS hard
FROM rollouts
WHERE NOT mask_sample
GROUP BY agent
ORDER BY agent
