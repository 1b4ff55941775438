-- Leaderboard: each agent's mean reward across repeats (the mean of its per-repeat mean
-- rewards) with the Student-t 95% interval around it, as NeMo Gym computes them (from the
-- agents table); beside it the pooled mean over every rollout, which differs when repeats
-- hold different numbers of rollouts, and how many repeats the interval rests on. With one
-- repeat there is no interval, and the mean is that repeat's.
SELECT agent,
       COALESCE("mean_across_repeats/mean/reward", "mean/reward") AS mean_reward,
       "ci_low_95_across_repeats/mean/reward" AS ci_low,
       "ci_high_95_across_repeats/mean/reward" AS ci_high,
       "mean/reward" AS pooled_mean_reward,
       num_repeats
FROM agents
ORDER BY mean_reward DESC
