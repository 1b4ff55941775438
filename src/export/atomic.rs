//! Atomic output files: every artifact is written to a temporary name in its target
//! folder and renamed into place only when all of a command's outputs are complete, so
//! a failed run leaves no half-written file; an output path that names one of the
//! command's inputs is refused, so nothing a user gave us is overwritten. An output that
//! names an existing device or pipe (`/dev/null`, `/dev/stdout`) is a stream: it is
//! written in place, never replaced by a rename.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A set of files written together.
#[derive(Default)]
pub struct OutputSet {
    /// Each output with its temporary file (`None`: a stream written in place).
    staged: Vec<(Option<PathBuf>, PathBuf)>,
    inputs: Vec<PathBuf>,
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (fs::canonicalize(a), fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

impl OutputSet {
    /// `inputs`: files this command read; none of them may be an output.
    pub fn new(inputs: &[&Path]) -> Self {
        OutputSet { staged: Vec::new(), inputs: inputs.iter().map(|p| p.to_path_buf()).collect() }
    }

    /// Checks that `path` can be an output: not an input, and its folder exists.
    pub fn check(&self, path: &Path) -> Result<()> {
        if self.inputs.iter().any(|i| same_file(i, path)) {
            return Err(Error::Usage(format!(
                "{}: refusing to overwrite an input file with an output; choose another output path",
                path.display()
            )));
        }
        let dir = parent(path);
        if !dir.is_dir() {
            return Err(Error::Usage(format!("{}: the output folder does not exist", dir.display())));
        }
        Ok(())
    }

    /// Stages `bytes` for `path` (written to a temporary file now).
    pub fn add(&mut self, path: &Path, bytes: &[u8]) -> Result<()> {
        let mut w = self.create(path)?;
        w.write_all(bytes).and_then(|()| w.flush()).map_err(|e| Error::write(path, e))
    }

    /// Reserves a temporary path for `path` that the caller writes itself (`path` itself
    /// when it is a device or pipe).
    pub fn temp_for(&mut self, path: &Path) -> Result<PathBuf> {
        self.check(path)?;
        if is_stream(path) {
            self.staged.push((None, path.to_path_buf()));
            return Ok(path.to_path_buf());
        }
        let name = path.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let tmp = parent(path).join(format!(".{name}.rollstat-tmp-{}", std::process::id()));
        self.staged.push((Some(tmp.clone()), path.to_path_buf()));
        Ok(tmp)
    }

    /// Creates the temporary file for `path` and returns a buffered writer to it.
    pub fn create(&mut self, path: &Path) -> Result<std::io::BufWriter<fs::File>> {
        let tmp = self.temp_for(path)?;
        let f = if tmp == path { fs::OpenOptions::new().write(true).open(&tmp) } else { fs::File::create(&tmp) }
            .map_err(|e| Error::write(&tmp, e))?;
        Ok(std::io::BufWriter::with_capacity(8 << 20, f))
    }

    /// Renames every staged file into place.
    pub fn commit(mut self) -> Result<Vec<PathBuf>> {
        let staged = std::mem::take(&mut self.staged);
        let mut done = Vec::new();
        for (tmp, path) in &staged {
            if let Some(tmp) = tmp {
                fs::rename(tmp, path).map_err(|e| Error::write(path, e))?;
            }
            done.push(path.clone());
        }
        Ok(done)
    }
}

impl Drop for OutputSet {
    fn drop(&mut self) {
        for (tmp, _) in &self.staged {
            if let Some(tmp) = tmp {
                let _ = fs::remove_file(tmp);
            }
        }
    }
}

/// Whether `path` exists and is neither a regular file nor a folder: a device, a pipe or
/// a socket, which a rename would replace instead of writing to.
fn is_stream(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir())
}

fn parent(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Maps an error of a streaming writer: bad input data found while writing (a malformed
/// input row echoed as `sample`) is the user's (exit 2); anything else is a write failure.
pub fn stream_error(path: &Path, e: std::io::Error) -> Error {
    if e.kind() == std::io::ErrorKind::InvalidData {
        Error::Mismatch(e.to_string())
    } else {
        Error::write(path, e)
    }
}
