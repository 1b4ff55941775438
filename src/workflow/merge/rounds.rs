//! The statistics of both bucket-by-bucket merges as rounds over the buckets: the
//! *plan* (every run's state, `lean.rs`), each bucket's *share* of a round, and
//! combining the shares into the next plan, in this process or as tasks on a cluster.
//!
//! In a round, each bucket's rows give its *share* (`merge … --share-out` on a cluster,
//! the same code in the merge): in the counting round each run's counts, extremes and
//! first histograms; in the summing rounds, for each column, the sums of the nodes of
//! numpy's pairwise tree that lie wholly in the bucket's positions plus the values of
//! the (at most two) leaf blocks it shares with its neighbours; in the selecting
//! rounds the counts of its values in the bins still searched. The shares are added to
//! the plan in bucket order (`merge combine` on a cluster): the counts fix every
//! column's length and where each bucket's values start in it, the pieces complete the
//! sums exactly as numpy adds them, the deviations take a round of their own after the
//! means (pandas' two passes), and the plan says whether another round is needed. A
//! merge given a finished plan (`--plan`) checks it against its own counting round and
//! reads the slices only to count and to write the task entries.
//!
//! Shares and plans are files of rollstat's own (a magic, then the state in bincode,
//! zstd-compressed with a checksum). A summing share holds a few numbers per column and
//! level of the tree and at most 254 loose values per column; a counting share keeps
//! up to 4,096 values per column before it counts them in bins, and a selecting one
//! the values of the bins it gathers (at most 65,536 per bin searched). Every share and
//! plan after the counting round carries a digest of what that round counted, so pieces
//! of different rounds of rows never mix, and the final merge checks the plan against
//! what its own counting finds.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::lean::{mix, LeanRun};
use crate::codec::{decode, decode_all, encode};
use crate::error::{Error, Location, Result};
use crate::export::atomic::OutputSet;
use crate::ingest::fields::resolve_fields;
use crate::ingest::RolloutTable;
use crate::metrics::levels::Profiled;

const MAGIC: &[u8; 16] = b"rollstat-levels\x02";
const PLAN: u8 = 1;
const SHARES: u8 = 2;

/// Which merge the rounds are for: `aggregate` keeps each run's fields in its own
/// order, `profile` one order of fields for every run (each padded to all of them).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum Command {
    Aggregate,
    Profile,
}

impl Command {
    fn name(self) -> &'static str {
        match self {
            Command::Aggregate => "aggregate",
            Command::Profile => "profile",
        }
    }
}
/// Decompressed bytes per compressed byte trusted before a state is read (histograms
/// of zeros compress far better than slices).
const MAX_RATIO: usize = 4096;

/// Where the rounds are: each run's statistics state after the rounds so far.
pub struct Plan {
    /// Rounds combined so far (1 after the counting round).
    pub round: u32,
    /// A digest of what the counting round counted (see [`Header`]).
    sweep: u64,
    command: Command,
    /// `profile`: the fields of every run, in the sweep's order of first appearance.
    pub(super) fields: Vec<String>,
    /// `profile`: what its task entries need, settled over the sweep's buckets as the
    /// merge settles it.
    pub(super) entries: ProfileEntries,
    /// The runs, in the order the counting round first saw them.
    pub(super) runs: Vec<PlanRun>,
    /// Within a round: what the shares absorbed so far settled (not written).
    fold: Fold,
}

/// What a round's shares settle as they are absorbed, bucket after bucket: each run's
/// last bucket (by first task), and for a profile the pairs and fields seen
/// and the measured rollouts so far.
#[derive(Default)]
struct Fold {
    last: HashMap<usize, i64>,
    seen_pairs: std::collections::HashSet<(Option<String>, Option<String>)>,
    measured: u64,
}

/// What a profile's task entries need settled over the whole sweep: the distinct
/// (server, agent) pairs of the measured input rows in key order (which settle the
/// labels), whether runs fan out, and whether every value is an integer or a bool.
#[derive(Default, Clone, PartialEq, Debug, Serialize, Deserialize)]
pub(super) struct ProfileEntries {
    pub(super) pairs: Vec<(Option<String>, Option<String>)>,
    pub(super) fan_out: bool,
    pub(super) all_int: bool,
}

/// What one bucket tells a profile's counting round besides its runs' shares.
#[derive(Serialize, Deserialize)]
pub(super) struct BucketInfo {
    /// Its measured input rows' distinct (server, agent) pairs, in key order.
    pub(super) pairs: Vec<(Option<String>, Option<String>)>,
    pub(super) fan_out: bool,
    /// With measured (unmasked) rollouts: their fields in order, whether all are
    /// integers, and how many.
    pub(super) measured: Option<(Vec<String>, bool, u64)>,
}

#[derive(Serialize, Deserialize)]
pub(super) struct PlanRun {
    /// Run key (`None`: the rollouts nothing names, labelled by `--agent`).
    pub(super) key: Option<String>,
    /// Fields in the run's order of first appearance.
    pub(super) names: Vec<String>,
    /// Whether another round is needed.
    pub(super) more: bool,
    /// Aggregate: whether every value of every field of the run is an integer or a
    /// bool (which writes the extremes as integers), settled as the merge settles it.
    pub(super) all_int: bool,
    pub(super) lean: LeanRun,
}

/// One bucket's share of a round for one run.
#[derive(Serialize, Deserialize)]
pub(super) struct Share {
    pub(super) key: Option<String>,
    /// The first task of the run's rows in the bucket: names the bucket in the plan.
    pub(super) first_task: i64,
    /// Counting round: the bucket's fields, in its order (later rounds: the plan's).
    pub(super) names: Vec<String>,
    /// Counting round: whether every value of the bucket's rows is an integer or a bool.
    pub(super) all_int: bool,
    pub(super) lean: LeanRun,
}

fn bad(path: &Path, why: &str) -> Error {
    Error::bad(
        Location::file(path),
        format!("not a rollstat level state ({why}); give the files `merge … --share-out` or `merge combine` wrote"),
    )
}

/// What a state file says of itself: the round its data is of (or follows, for a
/// plan), the command, and the sweep: a digest of what the counting round counted, the
/// same in every later plan and share (0 before it).
#[derive(Clone, Copy, Serialize, Deserialize)]
struct Header {
    round: u32,
    command: Command,
    sweep: u64,
}

/// `data` zstd-compressed with a checksum of its content: a file damaged on its way
/// between machines is refused when read, not read as other numbers.
fn packed(data: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut c = zstd::bulk::Compressor::new(3)?;
    c.include_checksum(true)?;
    c.compress(data)
}

/// Writes a state file atomically, never over one of `read`.
fn write_state(path: &Path, kind: u8, h: Header, body: impl Serialize, read: &[&Path]) -> Result<()> {
    let mut bytes = MAGIC.to_vec();
    let data = encode((kind, h, body)).and_then(|d| packed(&d)).map_err(|e| Error::write(path, e))?;
    bytes.extend_from_slice(&data);
    let mut out = OutputSet::new(read);
    out.add(path, &bytes)?;
    out.commit()?;
    Ok(())
}

/// Reads a state file of `kind`: its header and body.
fn read_state<T: DeserializeOwned>(path: &Path, kind: u8) -> Result<(Header, T)> {
    use std::io::Read;
    let bytes = std::fs::read(path).map_err(|e| Error::read(path, e))?;
    let body = match bytes.strip_prefix(MAGIC.as_slice()) {
        Some(body) => body,
        None if bytes.len() >= MAGIC.len() && bytes.starts_with(&MAGIC[..15]) => {
            return Err(bad(path, "written by another version of rollstat; run the rounds again with this one"))
        }
        None => return Err(bad(path, "no level state header")),
    };
    let limit = body.len().saturating_mul(MAX_RATIO).saturating_add(1 << 20);
    let mut data = Vec::new();
    zstd::stream::read::Decoder::new(body)
        .and_then(|d| d.take(limit as u64 + 1).read_to_end(&mut data))
        .map_err(|_| bad(path, "its data does not decompress"))?;
    if data.len() > limit {
        return Err(bad(path, "its data does not decompress"));
    }
    match decode::<(u8, Header)>(&data) {
        Some(((k, h), at)) if k == kind => decode_all(&data[at..]).map(|body| (h, body)).ok_or_else(|| damaged(path)),
        Some(((PLAN, _), _)) => Err(bad(path, "a plan where a share was expected")),
        Some(((SHARES, _), _)) => Err(bad(path, "a share where a plan was expected")),
        _ => Err(damaged(path)),
    }
}

fn damaged(path: &Path) -> Error {
    bad(path, "cut short or damaged")
}

impl Plan {
    /// Reads a plan `merge combine` wrote.
    pub fn read(path: &Path) -> Result<Plan> {
        let (Header { round, command, sweep }, (fields, entries, runs)) = read_state(path, PLAN)?;
        let mut plan = Plan { round, sweep, command, fields, entries, runs, fold: Fold::default() };
        match plan.restore() {
            true => Ok(plan),
            false => Err(damaged(path)),
        }
    }

    /// Whether a plan read back is one the rounds could have left (see
    /// [`LeanRun::restore`]).
    fn restore(&mut self) -> bool {
        // A profile's runs have every field of the profile.
        let fields = (self.command == Command::Profile && self.round > 0).then_some(&self.fields);
        self.runs.iter_mut().all(|r| {
            r.lean.counts().1.len() == r.names.len() && fields.is_none_or(|f| r.names == *f) && r.lean.restore()
        })
    }

    /// Reads a plan for `command`'s merge; a plan of the other command is refused.
    pub fn read_for(path: &Path, command: Command) -> Result<Plan> {
        let plan = Plan::read(path)?;
        if plan.command != command {
            return Err(Error::bad(
                Location::file(path),
                format!(
                    "a plan of `merge {}` given to `merge {}`: give the plan of this command's rounds",
                    plan.command.name(),
                    command.name()
                ),
            ));
        }
        Ok(plan)
    }

    fn write(&self, path: &Path, read: &[&Path]) -> Result<()> {
        write_state(path, PLAN, self.header(), (&self.fields, &self.entries, &self.runs), read)
    }

    fn header(&self) -> Header {
        Header { round: self.round, command: self.command, sweep: self.sweep }
    }

    /// Whether another round is needed.
    pub fn more(&self) -> bool {
        self.round == 0 || self.runs.iter().any(|r| r.more)
    }

    /// The state of run `key` (`None` when it has no scored rollout).
    pub(super) fn run(&self, key: &Option<String>) -> Option<&PlanRun> {
        self.runs.iter().find(|r| &r.key == key)
    }

    /// Checks this finished plan against `counted`, the state the final merge's own
    /// counting round found: the same runs, each with the fields, rows, buckets,
    /// counts, extremes and digests of the values of the plan.
    pub(super) fn verify(&self, counted: &Plan) -> Result<()> {
        let which = |k: &Option<String>| k.as_deref().unwrap_or("(unnamed)").to_string();
        if let Some(r) = counted.runs.iter().find(|r| self.run(&r.key).is_none()) {
            return Err(Error::Mismatch(format!(
                "the plan has no run {}, which these slices hold: give the plan combined from these slices' shares",
                which(&r.key)
            )));
        }
        if let Some(r) = self.runs.iter().find(|r| counted.run(&r.key).is_none()) {
            return Err(Error::Mismatch(format!(
                "the plan has a run {} that these slices do not hold: give the plan combined from these slices' shares",
                which(&r.key)
            )));
        }
        for c in &counted.runs {
            let r = self.run(&c.key).expect("checked above");
            if r.more || !r.lean.finished() {
                return Err(Error::Mismatch(format!(
                    "the plan is not finished (run {} needs another round): run the rounds of `--share-out` \
                     and `merge combine` until combine prints `done`",
                    which(&c.key)
                )));
            }
            if r.names != c.names || r.lean.fingerprint() != c.lean.fingerprint() {
                return Err(Error::Mismatch(format!(
                    "the plan's run {} counts other rows or fields than these slices hold: give the plan \
                     combined from these slices' shares",
                    which(&c.key)
                )));
            }
        }
        if self.entries != counted.entries {
            return Err(Error::Mismatch(
                "the plan settled other labels or rules for the task entries than these slices give: give the plan \
                 of these slices' rounds"
                    .into(),
            ));
        }
        Ok(())
    }

    /// A plan before the counting round, for `command`'s merge.
    pub(super) fn new(command: Command) -> Plan {
        Plan {
            round: 0,
            sweep: 0,
            command,
            fields: Vec::new(),
            entries: ProfileEntries { all_int: true, ..Default::default() },
            runs: Vec::new(),
            fold: Fold::default(),
        }
    }

    /// Adds one bucket's shares of this round (with, in the counting round of a
    /// profile, what the bucket tells besides them), buckets in order; the reason when
    /// they do not fit the plan.
    pub(super) fn absorb(&mut self, shares: Vec<Share>, infos: Vec<BucketInfo>) -> std::result::Result<(), String> {
        let counting = self.round == 0;
        let profile = self.command == Command::Profile;
        if counting {
            self.fold_bucket_infos(infos);
        }
        for s in shares {
            let i = match self.runs.iter().position(|r| r.key == s.key) {
                Some(i) => i,
                None if counting => {
                    self.runs.push(PlanRun {
                        key: s.key.clone(),
                        names: Vec::new(),
                        more: true,
                        all_int: true,
                        lean: LeanRun::default(),
                    });
                    self.runs.len() - 1
                }
                None => {
                    return Err("a share of a run the plan does not have: give the shares written with the plan given \
                                here"
                        .into())
                }
            };
            if let Some(&l) = self.fold.last.get(&i).filter(|&&l| s.first_task <= l) {
                return Err(format!(
                    "shares out of bucket order (task {} after task {l}): give the shares in the buckets' order",
                    s.first_task
                ));
            }
            self.fold.last.insert(i, s.first_task);
            let run = &mut self.runs[i];
            // Profile: one order of fields for all runs, in the sweep's order.
            let names = if profile { &mut self.fields } else { &mut run.names };
            let known = names.len();
            let global: Vec<usize> = match counting {
                true => s.names.iter().map(|n| position_or_push(names, n)).collect(),
                false => (0..names.len()).collect(),
            };
            if !run.more || s.lean.counts().1.len() != global.len() {
                return Err(
                    "a share that does not fit the plan: give the shares written with the plan given here".into()
                );
            }
            if counting && !profile && !all_int_still(s.all_int, s.names.len(), &run.names, known, run.lean.counts().0)
            {
                run.all_int = false;
            }
            run.lean.absorb(s.first_task, s.lean, &global);
        }
        Ok(())
    }

    /// Ends the round: each run still passing ends its pass (`changed(run)` is the
    /// error when the round did not see the rows the counting round counted), and the
    /// counting round names the sweep.
    pub(super) fn end_round(&mut self, changed: impl Fn(&str) -> Error) -> Result<()> {
        let counting = self.round == 0;
        let width = self.fields.len();
        for r in self.runs.iter_mut().filter(|r| r.more) {
            if counting && self.command == Command::Profile {
                // Every label has every field of the profile.
                r.lean.pad_fields(width);
                r.names = self.fields.clone();
            }
            r.more = r.lean.end_pass().map_err(|_| changed(r.key.as_deref().unwrap_or("(unnamed)")))?;
        }
        if counting {
            // What was counted names the sweep for every later share and plan.
            let mut h = 0x5EED_u64;
            for r in &self.runs {
                for b in r.key.iter().chain(&r.names).flat_map(|s| s.bytes().chain([0])) {
                    h = mix(h, b as u64);
                }
                for x in r.lean.fingerprint() {
                    h = mix(h, x);
                }
            }
            self.sweep = h;
        }
        self.round += 1;
        self.fold = Fold::default();
        Ok(())
    }

    /// Adds buckets' infos to what a profile's entries need, as the merge's first pass
    /// adds its buckets.
    fn fold_bucket_infos(&mut self, infos: Vec<BucketInfo>) {
        let (e, f) = (&mut self.entries, &mut self.fold);
        for b in infos {
            for p in b.pairs {
                if f.seen_pairs.insert(p.clone()) {
                    e.pairs.push(p);
                }
            }
            e.fan_out |= b.fan_out;
            let Some((names, all_int, rows)) = b.measured else { continue };
            let known = self.fields.len();
            for n in &names {
                position_or_push(&mut self.fields, n);
            }
            if !all_int_still(all_int, names.len(), &self.fields, known, f.measured) {
                e.all_int = false;
            }
            f.measured += rows;
        }
    }
}

/// The position of `n` in `names`, pushed there when new.
fn position_or_push(names: &mut Vec<String>, n: &str) -> usize {
    match names.iter().position(|m| m == n) {
        Some(g) => g,
        None => {
            names.push(n.to_string());
            names.len() - 1
        }
    }
}

/// Whether a set of fields stays all-integer after a bucket of `before` earlier values:
/// a value missing anywhere (a field not in every bucket's rows — this bucket has `own`
/// of the `names` seen, of which `known` were seen before it — or one that appears
/// after the first bucket) or not an integer (`all_int` false) makes it not so.
fn all_int_still(all_int: bool, own: usize, names: &[String], known: usize, before: u64) -> bool {
    let new_field = names.len() > known;
    all_int && own >= names.len() && !(new_field && before > 0)
}

/// Writes one round's shares (in bucket order) for `command`'s merge.
pub(super) fn write_share_file(
    shares: &[Share],
    infos: &[BucketInfo],
    plan: Option<&Plan>,
    command: Command,
    out: &Path,
    read: &[&Path],
) -> Result<()> {
    let h = plan.map_or(Header { round: 0, command, sweep: 0 }, |p| Header { command, ..p.header() });
    write_state(out, SHARES, h, (shares, infos), read)
}

fn read_shares(path: &Path) -> Result<(Header, Vec<Share>, Vec<BucketInfo>)> {
    let (h, (mut shares, infos)): (_, (Vec<Share>, _)) = read_state(path, SHARES)?;
    match shares.iter_mut().all(|s| s.lean.restore()) {
        true => Ok((h, shares, infos)),
        false => Err(damaged(path)),
    }
}

/// Adds the shares of one round (`shares`, files in bucket order) to `plan` (none for
/// the counting round) and writes the next plan to `out`; returns it.
pub fn combine(plan_path: Option<&Path>, shares: &[PathBuf], out: &Path) -> Result<Plan> {
    let mut plan = match plan_path {
        Some(p) => Plan::read(p)?,
        None => Plan::new(Command::Aggregate),
    };
    if plan_path.is_some() && !plan.more() {
        return Err(Error::Usage("the plan is finished: give it to `merge aggregate --plan`".into()));
    }
    let counting = plan.round == 0;
    for (n, path) in shares.iter().enumerate() {
        let (Header { round, command, sweep }, list, infos) = read_shares(path)?;
        if counting && n == 0 {
            plan.command = command;
        }
        let wrong = if command != plan.command {
            Some(format!(
                "a share of `merge {}` among those of `merge {}`: give one command's shares",
                command.name(),
                plan.command.name()
            ))
        } else if round != plan.round {
            Some(format!(
                "a share of round {} where the plan is at round {}: give this round's shares, written with the plan \
                 given here",
                round + 1,
                plan.round + 1
            ))
        } else if !counting && sweep != plan.sweep {
            Some(
                "a share written with another plan (of other rows): give this round's shares, written with the plan \
                 given here"
                    .into(),
            )
        } else {
            plan.absorb(list, infos).err()
        };
        if let Some(why) = wrong {
            return Err(Error::bad(Location::file(path), why));
        }
    }
    plan.end_round(|run| {
        Error::Mismatch(format!(
            "the shares do not hold the rows the plan counted for run {run}: give one share of every bucket, all \
             written with the plan given here"
        ))
    })?;
    let mut read: Vec<&Path> = shares.iter().map(PathBuf::as_path).collect();
    read.extend(plan_path);
    plan.write(out, &read)?;
    Ok(plan)
}

/// The counting round's share of one run's scored rollouts of a bucket, `one` (every
/// field the rows have, in their order).
pub(super) fn counting_share(key: Option<String>, one: &Profiled<'_>) -> Share {
    let names = one.fields.iter().map(|f| f.name.clone()).collect();
    let mut lean = LeanRun::default();
    lean.visit(one, &(0..one.fields.len()).collect::<Vec<_>>());
    lean.close_share();
    Share { key, first_task: one.task(0), names, all_int: one.all_int, lean }
}

/// A later round's share of run `key`'s scored rollouts `rows` of bucket `t` (read from
/// `slice`), from the plan's state of the run: none when the run needs no more rounds;
/// refused when the plan has no such run (it was combined from other slices).
pub(super) fn round_share(
    plan: &Plan,
    key: &Option<String>,
    t: &RolloutTable,
    rows: &[usize],
    slice: &Path,
) -> Result<Option<Share>> {
    let r = plan.run(key).ok_or_else(|| {
        let run = key.as_deref().unwrap_or("(unnamed)");
        Error::Mismatch(format!(
            "{}: run {run} is not in the plan: give the plan combined from the shares of these slices",
            slice.display()
        ))
    })?;
    if !r.more || rows.is_empty() {
        return Ok(None);
    }
    let fields = resolve_fields(t, r.names.iter().cloned());
    let p = Profiled::with_fields(t, rows, &vec![""; rows.len()], fields, false);
    let mut lean = r.lean.share(p.task(0));
    lean.visit(&p, &(0..p.fields.len()).collect::<Vec<_>>());
    lean.close_share();
    Ok(Some(Share { key: key.clone(), first_task: p.task(0), names: Vec::new(), all_int: false, lean }))
}

/// Settles the statistics once `counted` holds the merge's own counting round: from
/// `given`, a finished plan of rounds run elsewhere (checked against `counted`), or
/// from rounds run in this process —
/// `round(plan)` reads every bucket and absorbs its shares ([`round_share`]) into the
/// plan — until no run needs another.
pub(super) fn settle(
    mut counted: Plan,
    given: Option<Plan>,
    mut round: impl FnMut(&mut Plan) -> Result<()>,
) -> Result<Plan> {
    let changed = |run: &str| {
        Error::Mismatch(format!(
            "the slices changed while the merge read them: a pass over them did not find the scored rollouts of \
             run {run} that the first pass found; merge slices that nothing writes to"
        ))
    };
    counted.end_round(changed)?;
    if let Some(given) = given {
        given.verify(&counted)?;
        return Ok(given);
    }
    let mut plan = counted;
    while plan.more() {
        let t0 = std::time::Instant::now();
        round(&mut plan)?;
        plan.end_round(changed)?;
        crate::trace::trace(&format!("merge: pass {}", plan.round), t0);
    }
    Ok(plan)
}

/// [`Plan::absorb`] of shares made here, which fit by construction unless the slices
/// changed while the merge read them.
pub(super) fn absorb_own(plan: &mut Plan, shares: Vec<Share>, infos: Vec<BucketInfo>) -> Result<()> {
    plan.absorb(shares, infos).map_err(|why| {
        Error::Mismatch(format!(
            "the slices changed while the merge read them ({why}); merge slices that nothing writes to"
        ))
    })
}
