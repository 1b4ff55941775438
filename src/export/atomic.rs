//! Atomic output files: every artifact is written to a temporary name in its target
//! folder and renamed into place only when all of a command's outputs are complete, so
//! a failed run leaves no half-written file; an output path that names one of the
//! command's inputs is refused, so nothing a user gave us is overwritten.
//!
//! Paths that are not plain files are resolved first, so no rename ever replaces them:
//! one of the process's own descriptors by name (`/dev/stdout`, `/dev/stderr`,
//! `/dev/fd/N`, `/proc/self/fd/N`) is written through that descriptor, at its current
//! position (a shell's `> file` or `>> file` gets the bytes in order with everything
//! else printed there); a device or pipe is written in place; a symbolic link to a file
//! is followed, and the file it names is replaced atomically, the link kept.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::direct::FileWriter;
use crate::error::{Error, Result};

/// A set of files written together.
#[derive(Default)]
pub struct OutputSet {
    /// Each output with its temporary file (`None`: a stream written in place).
    staged: Vec<(Option<PathBuf>, PathBuf)>,
    inputs: Vec<PathBuf>,
}

/// Whether `a` and `b` name one existing file (after following links).
pub fn same_file(a: &Path, b: &Path) -> bool {
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
        if path.is_dir() {
            return Err(Error::Usage(format!("{}: is a folder; give the output file's path", path.display())));
        }
        let dir = parent(path);
        match fs::metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(Error::Usage(format!("{}: is not a folder", dir.display()))),
            Err(_) => return Err(Error::Usage(format!("{}: the output folder does not exist", dir.display()))),
        }
        // A file is written beside its destination and renamed: the folder must let us.
        if let Target::File(dest) = target(path) {
            let folder = parent(&dest);
            if let Ok(c) = std::ffi::CString::new(folder.as_os_str().as_encoded_bytes()) {
                // SAFETY: `c` is a valid NUL-terminated path; access reads it only.
                if unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
                    let e = std::io::Error::last_os_error();
                    return Err(Error::Usage(format!(
                        "{}: cannot write in its folder {} ({e})",
                        path.display(),
                        folder.display()
                    )));
                }
            }
        }
        Ok(())
    }

    /// Stages `bytes` for `path` (written to a temporary file now).
    pub fn add(&mut self, path: &Path, bytes: &[u8]) -> Result<()> {
        let mut w = self.create(path)?;
        w.write_all(bytes).and_then(|()| w.finish()).map_err(|e| Error::write(path, e))
    }

    /// Opens `path` for writing: a temporary file staged for a rename at
    /// [`OutputSet::commit`] (returned with `true`), or the stream it names (see the
    /// module notes).
    fn open(&mut self, path: &Path) -> Result<(fs::File, bool)> {
        self.check(path)?;
        match target(path) {
            Target::Descriptor(fd) => {
                // SAFETY: dup has no memory preconditions; the new descriptor is ours
                // and owned by the returned File.
                let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
                if dup < 0 {
                    return Err(Error::write(path, std::io::Error::last_os_error()));
                }
                self.staged.push((None, path.to_path_buf()));
                // SAFETY: `dup` is a fresh descriptor nothing else owns.
                Ok((unsafe { <fs::File as std::os::fd::FromRawFd>::from_raw_fd(dup) }, false))
            }
            Target::Stream => {
                let f = fs::OpenOptions::new().write(true).open(path).map_err(|e| Error::write(path, e))?;
                self.staged.push((None, path.to_path_buf()));
                Ok((f, false))
            }
            Target::File(dest) => {
                let name = dest.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
                let tmp = parent(&dest).join(format!(".{name}.rollstat-tmp-{}", std::process::id()));
                let f = fs::File::create(&tmp).map_err(|e| {
                    if refused(&e) {
                        Error::Usage(format!(
                            "{}: cannot create a file in {} ({e})",
                            dest.display(),
                            parent(&dest).display()
                        ))
                    } else {
                        Error::write(&tmp, e)
                    }
                })?;
                self.staged.push((Some(tmp), dest));
                Ok((f, true))
            }
        }
    }

    /// Opens `path` for writing (see [`OutputSet::open`]) through a large buffer; a
    /// large new file is written around the page cache (see [`super::direct`]).
    pub fn create(&mut self, path: &Path) -> Result<FileWriter> {
        let (f, new_file) = self.open(path)?;
        Ok(FileWriter::new(f, new_file))
    }

    /// Renames every staged file into place.
    pub fn commit(mut self) -> Result<Vec<PathBuf>> {
        let mut done = Vec::new();
        while !self.staged.is_empty() {
            let (tmp, path) = &self.staged[0];
            if let Some(tmp) = tmp {
                // On failure the rest stay staged, so dropping the set removes their
                // temporary files.
                fs::rename(tmp, path).map_err(|e| Error::write(path, e))?;
            }
            done.push(self.staged.remove(0).1);
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

/// Where the bytes for an output path go.
enum Target {
    /// One of this process's open descriptors, named through /dev or /proc.
    Descriptor(i32),
    /// An existing device, pipe or socket: written in place.
    Stream,
    /// A file replaced atomically: the path itself, or the file a symbolic link names.
    File(PathBuf),
}

fn target(path: &Path) -> Target {
    let s = path.to_string_lossy();
    let fd = match s.as_ref() {
        "/dev/stdout" => Some(1),
        "/dev/stderr" => Some(2),
        _ => s.strip_prefix("/dev/fd/").or_else(|| s.strip_prefix("/proc/self/fd/")).and_then(|n| n.parse().ok()),
    };
    if let Some(fd) = fd {
        return Target::Descriptor(fd);
    }
    if fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
        return Target::Stream;
    }
    if fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        if let Ok(real) = fs::canonicalize(path) {
            return Target::File(real);
        }
        // A link to a file not made yet: write that file and keep the link.
        if let Ok(link) = fs::read_link(path) {
            return Target::File(if link.is_absolute() { link } else { parent(path).join(link) });
        }
    }
    Target::File(path.to_path_buf())
}

/// Whether `path` is the file, pipe or terminal this process's stdout writes to.
pub fn is_stdout(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(p) = fs::metadata(path) else { return false };
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: fstat writes a `stat` into the buffer it is given, and we read it only when
    // it reports success.
    let st = unsafe {
        if libc::fstat(1, st.as_mut_ptr()) != 0 {
            return false;
        }
        st.assume_init()
    };
    p.dev() == st.st_dev as u64 && p.ino() == st.st_ino as u64
}

/// Runs `work` with the output folder `dir` made ([`make_out_dir`]); when `work` fails,
/// the folder is removed again if this call made it (and it is still empty), so a failed
/// run leaves nothing behind.
pub fn in_out_dir<T>(dir: &Path, work: impl FnOnce() -> Result<T>) -> Result<T> {
    let existed = dir.exists();
    make_out_dir(dir)?;
    let r = work();
    if r.is_err() && !existed {
        let _ = fs::remove_dir(dir);
    }
    r
}

/// Creates the output folder `dir` (and its parents) when it is not there; a path that
/// exists as something else is a usage error, not a failure of ours.
pub fn make_out_dir(dir: &Path) -> Result<()> {
    if fs::metadata(dir).is_ok_and(|m| !m.is_dir()) {
        return Err(Error::Usage(format!("{}: is not a folder; --out-dir takes a folder", dir.display())));
    }
    fs::create_dir_all(dir).map_err(|e| {
        if refused(&e) {
            Error::Usage(format!("{}: cannot create the output folder ({e})", dir.display()))
        } else {
            Error::write(dir, e)
        }
    })
}

/// Whether the system refused to create a file or folder where the user pointed us
/// (permissions, a read-only file system): a usage error, not a failure of ours.
fn refused(e: &std::io::Error) -> bool {
    matches!(e.kind(), std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem)
}

/// Whether `path` exists and is not a regular file (a pipe, a device, a socket).
pub fn is_stream(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| !m.is_file())
}

fn parent(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}
