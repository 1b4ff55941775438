-- Leaderboard: each agent's mean reward across repeats with its Student-t 95% interval
-- (from the agents table, as NeMo Gym computes them), and how many rollouts it rests on.
SELECT agent,
       "mean/reward" AS mean_reward,
       "ci_low_95_across_repeats/mean/reward" AS ci_low,
       "ci_high_95_across_repeats/mean/reward" AS ci_high,
       num_repeats
FROM agents
ORDER BY mean_reward DESC
