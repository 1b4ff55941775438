//! Typed errors. Every error a user can cause names the file, the line and the key
//! involved and says what was expected; the CLI maps [`Error::is_bad_input`] to exit
//! status 2 and everything else (our own failures) to 1.

use std::fmt;
use std::path::{Path, PathBuf};

/// Where in a user's input a problem sits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub file: PathBuf,
    /// 1-based line number, when the problem belongs to one line.
    pub line: Option<u64>,
    /// 1-based row number of a table (Parquet input), when the problem belongs to one row.
    pub row: Option<u64>,
    /// The JSON key involved, when there is one.
    pub key: Option<String>,
}

impl Location {
    pub fn file(file: &Path) -> Self {
        Location { file: file.to_path_buf(), line: None, row: None, key: None }
    }
    pub fn line(file: &Path, line: u64) -> Self {
        Location { file: file.to_path_buf(), line: Some(line), row: None, key: None }
    }
    pub fn row(mut self, row: u64) -> Self {
        self.row = Some(row);
        self
    }
    pub fn key(mut self, key: &str) -> Self {
        self.key = Some(key.to_string());
        self
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ", line {line}")?;
        }
        if let Some(row) = self.row {
            write!(f, ", row {row}")?;
        }
        if let Some(key) = &self.key {
            write!(f, ", key `{key}`")?;
        }
        Ok(())
    }
}

/// Who shows an error, and so how it spells the options it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Door {
    /// The command line: `--allow-partial`, `--agent NAME`.
    Cli,
    /// The Python package: `allow_partial=True`, `agent="NAME"`.
    Python,
}

/// An option of a workflow's configuration, named by its parameter (`allow_partial`,
/// `agent`), as a message refers to it; each [`Door`] spells it its own way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opt {
    name: &'static str,
    /// The command line's flag when it is not the name with `_` as `-` (`--label` for
    /// `labels`).
    flag: Option<&'static str>,
    form: Form,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Form {
    /// The option itself (`--inputs`, `inputs=`).
    Named,
    /// A switch turned on (`--allow-partial`, `allow_partial=True`).
    On,
    /// A switch turned off: `--no-health-check`, `health_check=False`.
    Off,
    /// The option with a placeholder for its value (`--agent NAME`, `agent="NAME"`).
    Value(&'static str),
    /// The option with the value it was given: a number as it is (`--detect 0`,
    /// `detect=0`); text as it is on the command line and quoted in Python (`--inputs
    /// in.jsonl`, `inputs="in.jsonl"`), or quoted by both (`--baseline "b"`,
    /// `baseline="b"`).
    Given { value: String, text: bool, quoted: bool },
}

impl Opt {
    /// The option itself: `--inputs` / `inputs=`.
    pub const fn named(name: &'static str) -> Opt {
        Opt { name, flag: None, form: Form::Named }
    }
    /// A switch turned on: `--allow-partial` / `allow_partial=True`.
    pub const fn on(name: &'static str) -> Opt {
        Opt { name, flag: None, form: Form::On }
    }
    /// A switch turned off: `--no-health-check` / `health_check=False`.
    pub const fn off(name: &'static str) -> Opt {
        Opt { name, flag: None, form: Form::Off }
    }
    /// The option with a placeholder for its value: `--agent NAME` / `agent="NAME"`.
    pub const fn value(name: &'static str, value: &'static str) -> Opt {
        Opt { name, flag: None, form: Form::Value(value) }
    }
    /// The option with the number it was given: `--detect 0` / `detect=0`.
    pub fn number(name: &'static str, value: impl std::fmt::Display) -> Opt {
        Opt { name, flag: None, form: Form::Given { value: value.to_string(), text: false, quoted: false } }
    }
    /// The option with the text it was given: `--inputs in.jsonl` / `inputs="in.jsonl"`.
    pub fn text(name: &'static str, value: String) -> Opt {
        Opt { name, flag: None, form: Form::Given { value, text: true, quoted: false } }
    }
    /// The option with the text it was given, quoted by both doors: `--baseline "b"` /
    /// `baseline="b"`.
    pub fn quoted(name: &'static str, value: String) -> Opt {
        Opt { name, flag: None, form: Form::Given { value, text: true, quoted: true } }
    }
    /// The same option, spelled `--flag` on the command line where its flag is not the
    /// parameter's name with `_` as `-` (`Opt::named("labels").flag("label")`).
    pub fn flag(mut self, flag: &'static str) -> Opt {
        self.flag = Some(flag);
        self
    }
    /// The parameter's name (`allow_partial`).
    pub fn name(&self) -> &'static str {
        self.name
    }
    /// How `door` spells it.
    pub fn spell(&self, door: Door) -> String {
        match door {
            Door::Cli => {
                let flag = self.flag.map_or_else(|| self.name.replace('_', "-"), str::to_string);
                match &self.form {
                    Form::Named | Form::On => format!("--{flag}"),
                    Form::Off => format!("--no-{flag}"),
                    Form::Value(v) => format!("--{flag} {v}"),
                    Form::Given { value, quoted: false, .. } => format!("--{flag} {value}"),
                    Form::Given { value, quoted: true, .. } => format!("--{flag} {value:?}"),
                }
            }
            Door::Python => match &self.form {
                Form::Named => format!("{}=", self.name),
                Form::On => format!("{}=True", self.name),
                Form::Off => format!("{}=False", self.name),
                Form::Value(v) => format!("{}=\"{v}\"", self.name),
                Form::Given { value, text: true, .. } => format!("{}={value:?}", self.name),
                Form::Given { value, text: false, .. } => format!("{}={value}", self.name),
            },
        }
    }
}

/// A message that names options: text and [`Opt`]s, spelled by the door that shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Msg(Vec<Part>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Opt(Opt),
    /// Text each door says its own way (a command to run: `rollstat export --lake DIR`,
    /// `rollstat.export(..., lake=DIR)`).
    Door {
        cli: String,
        python: String,
    },
}

impl Msg {
    pub fn text(mut self, s: impl Into<String>) -> Msg {
        self.0.push(Part::Text(s.into()));
        self
    }
    pub fn opt(mut self, o: Opt) -> Msg {
        self.0.push(Part::Opt(o));
        self
    }
    /// This message followed by `more`.
    pub fn then(mut self, more: Msg) -> Msg {
        self.0.extend(more.0);
        self
    }
    /// Whether the message opens with the option `name`.
    pub fn opens_with(&self, name: &str) -> bool {
        matches!(self.0.first(), Some(Part::Opt(o)) if o.name == name)
    }
    /// Text the command line shows as `cli` and Python as `python`.
    pub fn per_door(mut self, cli: impl Into<String>, python: impl Into<String>) -> Msg {
        self.0.push(Part::Door { cli: cli.into(), python: python.into() });
        self
    }
    /// The message as `door` shows it.
    pub fn render(&self, door: Door) -> String {
        self.0
            .iter()
            .map(|p| match p {
                Part::Text(t) => t.clone(),
                Part::Opt(o) => o.spell(door),
                Part::Door { cli, .. } if door == Door::Cli => cli.clone(),
                Part::Door { python, .. } => python.clone(),
            })
            .collect()
    }
}

/// All errors of the library.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Malformed or inconsistent input: exit status 2.
    #[error("{loc}: {msg}")]
    BadInput { loc: Location, msg: String },
    /// Inputs that are individually well formed but do not fit together (alignment,
    /// duplicate keys, rows naming no agent): exit status 2.
    #[error("{0}")]
    Mismatch(String),
    /// A command-line value that cannot be used: exit status 2.
    #[error("{0}")]
    Usage(String),
    /// Input refused with a message that names options (how to fix it), at a place when
    /// it has one: exit status 2. Shown here with the command line's flags; see
    /// [`Error::render`].
    #[error("{}", refused(loc.as_ref(), msg, Door::Cli))]
    Refused { loc: Option<Location>, msg: Msg },
    /// A file we could not read (missing input: exit 2) or write (exit 1).
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error, input: bool },
    /// Polars failed (export, query).
    #[error("{0}")]
    Polars(String),
    /// A SQL query the user gave us failed to plan or run: exit 2.
    #[error("query failed: {0}")]
    Query(String),
    /// The caller cancelled the run (Ctrl-C in Python); nothing was written.
    #[error("interrupted; nothing was written")]
    Interrupted,
}

impl Error {
    pub fn bad(loc: Location, msg: impl Into<String>) -> Self {
        Error::BadInput { loc, msg: msg.into() }
    }
    pub fn read(path: &Path, source: std::io::Error) -> Self {
        Error::Io { path: path.to_path_buf(), source, input: true }
    }
    pub fn write(path: &Path, source: std::io::Error) -> Self {
        Error::Io { path: path.to_path_buf(), source, input: false }
    }
    /// Input refused, at `loc` when given, with a message that names options.
    pub fn refused(loc: Option<Location>, msg: Msg) -> Self {
        Error::Refused { loc, msg }
    }
    /// The message as `door` shows it: its options in that door's spelling.
    pub fn render(&self, door: Door) -> String {
        match self {
            Error::Refused { loc, msg } => refused(loc.as_ref(), msg, door),
            _ => self.to_string(),
        }
    }
    /// Where in the input the problem sits, when it has a place.
    pub fn location(&self) -> Option<&Location> {
        match self {
            Error::BadInput { loc, .. } => Some(loc),
            Error::Refused { loc, .. } => loc.as_ref(),
            _ => None,
        }
    }
    /// True when the user's input or flags are at fault (exit status 2).
    pub fn is_bad_input(&self) -> bool {
        match self {
            Error::BadInput { .. } | Error::Mismatch(_) | Error::Usage(_) | Error::Refused { .. } | Error::Query(_) => {
                true
            }
            Error::Io { input, .. } => *input,
            Error::Polars(_) | Error::Interrupted => false,
        }
    }
}

/// A [`Error::Refused`] message as `door` shows it.
fn refused(loc: Option<&Location>, msg: &Msg, door: Door) -> String {
    match loc {
        Some(l) => format!("{l}: {}", msg.render(door)),
        None => msg.render(door),
    }
}

#[cfg(feature = "engine")]
impl From<polars::prelude::PolarsError> for Error {
    fn from(e: polars::prelude::PolarsError) -> Self {
        Error::Polars(e.to_string())
    }
}

pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    /// One error, two spellings of its options: the command line's flags, Python's
    /// parameters; its place and its exit status are the same through either door.
    #[test]
    fn each_door_spells_the_options_its_own_way() {
        let msg = Msg::default()
            .text("no agent; pass ")
            .opt(Opt::value("agent", "NAME"))
            .text(" or ")
            .opt(Opt::on("allow_partial"))
            .text(" (no ")
            .opt(Opt::named("inputs"))
            .text(", not ")
            .opt(Opt::off("health_check"))
            .text(", not ")
            .opt(Opt::quoted("baseline", "b".into()))
            .text(", not ")
            .opt(Opt::text("inputs", "in.jsonl".into()))
            .text(", not ")
            .opt(Opt::number("detect", 0.5))
            .text(")");
        let e = Error::refused(Some(Location::line(Path::new("a.jsonl"), 3)), msg);
        assert_eq!(
            e.to_string(),
            "a.jsonl, line 3: no agent; pass --agent NAME or --allow-partial (no --inputs, not --no-health-check, not --baseline \"b\", not --inputs in.jsonl, not --detect 0.5)"
        );
        assert_eq!(e.render(Door::Cli), e.to_string());
        assert_eq!(
            e.render(Door::Python),
            "a.jsonl, line 3: no agent; pass agent=\"NAME\" or allow_partial=True (no inputs=, not health_check=False, not baseline=\"b\", not inputs=\"in.jsonl\", not detect=0.5)"
        );
        assert!(e.is_bad_input());
        assert_eq!(e.location().and_then(|l| l.line), Some(3));
        let spelled = Msg::default()
            .opt(Opt::quoted("labels", "k=v".into()).flag("label"))
            .text(": add it with ")
            .per_door("`rollstat export --lake DIR`", "`rollstat.export(..., lake=DIR)`");
        assert_eq!(spelled.render(Door::Cli), "--label \"k=v\": add it with `rollstat export --lake DIR`");
        assert_eq!(spelled.render(Door::Python), "labels=\"k=v\": add it with `rollstat.export(..., lake=DIR)`");
        let placeless = Error::refused(None, Msg::default().text("use ").opt(Opt::on("allow_partial")));
        assert_eq!(placeless.render(Door::Python), "use allow_partial=True");
        assert!(placeless.location().is_none());
    }
}
