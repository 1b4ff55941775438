//! The merge of a sweep split over many machines: `shard` cuts each rollouts file into
//! slices by bucket of tasks (bucket = ⌊task / width⌋), `join` joins one bucket's slices
//! from every file, and `merge` gives the artifacts of the files concatenated (in the
//! order the slices are given), byte for byte. The commands' entry points are in
//! `entry.rs`; this file states the contract every merged statistic keeps.
//!
//! **The state.** A statistic over the sweep is a partial state with three operations:
//! a bucket's rows make a *share* (update; `lean.rs` holds one run's state: counts,
//! pairwise sums, deviations, selection), shares are added into the *plan* in bucket
//! order (combine; `Plan::absorb`, or `merge combine` on a cluster), and the finished
//! plan gives the agent and repeat levels (finalize; `LeanRun::agent_members`,
//! `LeanRun::repeat_entries`). The numbers are those of the single-machine code.
//!
//! **The rounds.** Exactness that needs several passes — numpy's pairwise tree, pandas'
//! two-pass standard deviation, exact medians and quartiles — is rounds of the same
//! loop, not another code path: a counting round fixes each column's length and where
//! each bucket's values start, summing rounds complete the means and then the
//! deviations, selecting rounds narrow each rank, and the plan says whether another
//! round is needed (`rounds.rs`). [`round_here`] is the loop in this process; on a
//! cluster each round is `merge … --share-out` per bucket, then `merge combine`.
//!
//! **The two strategies.** One rule, applied to the slices' heads before any slice is
//! read, picks how (`entry.rs`): bucket by bucket (`buckets.rs` reads the slices in
//! order, each with the input rows of its tasks, and checks the runs as the whole table
//! would; `aggregate.rs` and `profile.rs` are the two merges, each making its shares
//! through [`BucketShares`]), or the slices read back as one table for the
//! single-machine code (asked for, custom metrics, or slices out of task order). Never
//! read everything and then fall back.

mod aggregate;
mod buckets;
mod entry;
mod lean;
mod profile;
mod rounds;

use crate::error::Result;
use buckets::{Step, Sweep};
use rounds::{absorb_own, BucketInfo, Command, Plan, Share};

pub use entry::{
    aggregate_slices, input_slice_path, join_slices, merge_aggregate, merge_export, merge_profile,
    merge_profile_shares, merge_shares, profile_slices, shard, slice_path, InputsGiven, MergeAggregateConfig,
    MergeOutcome, MergeProfileConfig, Merged, ShardConfig, ShardRun, SliceSweep, MANIFEST,
};
pub use rounds::combine;

/// What one command's bucket-by-bucket merge makes of a bucket for the rounds of its
/// statistics; reading the buckets, running the rounds here and writing the share
/// files are the same for both commands.
trait BucketShares {
    /// The merge the shares are for.
    const COMMAND: Command;

    /// A bucket's shares of a round: the counting round without a plan, with what the
    /// bucket tells besides its runs' shares; later rounds with the plan the last
    /// round's combine wrote.
    fn shares(&self, s: &Step<'_>, plan: Option<&Plan>) -> Result<(Vec<Share>, Vec<BucketInfo>)>;
}

/// One round of the statistics in this process: every step of `sweep` read in order,
/// the shares `cmd` makes of each absorbed into the plan.
fn round_here(cmd: &impl BucketShares, plan: &mut Plan, sweep: Sweep<'_>) -> Result<()> {
    sweep
        .each_step(false, |s| {
            let (shares, _) = cmd.shares(s, Some(plan))?;
            absorb_own(plan, shares, Vec::new())
        })
        .map(drop)
}
