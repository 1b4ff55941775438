//! `rollstat join` (also `partial`): one bucket's slices, from every rollouts file of a
//! sweep, joined into one slice for `merge`.

use std::path::PathBuf;

use clap::Args as ClapArgs;

use super::common;
use crate::error::Result;

#[derive(ClapArgs, Debug, Clone)]
pub struct Args {
    /// The bucket's slices, in the order of the rollouts files they came from.
    #[arg(value_name = "SLICE", required = true)]
    pub slices: Vec<PathBuf>,
    /// Output slice.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

pub fn run(a: Args) -> Result<()> {
    let n = crate::workflow::merge::join_slices(&a.slices, &a.out)?;
    if !common::quiet() {
        say!("Joined {} slices: {n} rollouts", a.slices.len());
    }
    say!("Wrote {}", a.out.display());
    Ok(())
}
