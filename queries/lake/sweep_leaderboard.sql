-- Each run's mean reward in every sweep of a lake, oldest sweep first: the mean of its
-- per-repeat mean rewards with the Student-t 95% interval around it (from the agents
-- table), the pooled mean over every rollout, and how many repeats the interval rests
-- on. Add a sweep's labels by joining the sweeps table on `sweep`.
SELECT agent,
       sweep_order,
       sweep,
       COALESCE("mean_across_repeats/mean/reward", "mean/reward") AS mean_reward,
       "ci_low_95_across_repeats/mean/reward" AS ci_low,
       "ci_high_95_across_repeats/mean/reward" AS ci_high,
       "mean/reward" AS pooled_mean_reward,
       num_repeats
FROM agents
ORDER BY agent, sweep_order
