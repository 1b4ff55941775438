-- Token cost per correct answer: total output tokens an agent spent on measured
-- rollouts divided by its number of rollouts with reward >= 1.
SELECT agent,
       SUM(output_tokens) AS output_tokens,
       SUM(CASE WHEN CAST(reward AS DOUBLE) >= 1.0 THEN 1 ELSE 0 END) AS correct,
       CAST(SUM(output_tokens) AS DOUBLE) / SUM(CASE WHEN CAST(reward AS DOUBLE) >= 1.0 THEN 1 ELSE 0 END) AS tokens_per_correct
FROM rollouts
WHERE NOT mask_sample
GROUP BY agent
ORDER BY agent
