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
//!
//! The temporary file has no name where the system allows it: it is opened with
//! `O_TMPFILE` in the destination's folder and given a name only at commit, with
//! `linkat` (straight to the destination when that does not exist yet, else to a
//! temporary name renamed over it at once). A run that is killed, even with SIGKILL,
//! leaves no file behind and its space is freed when the process ends. Where the file
//! system has no `O_TMPFILE` (or `ROLLSTAT_TMPFILE=0`), the temporary is the hidden
//! `.{name}.rollstat-tmp-{pid}` beside the destination; an interrupted run removes it
//! (see [`crate::signals`]), and the next run writing the same output removes one whose
//! process is gone.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::direct::FileWriter;
use crate::error::{Error, Msg, Opt, Result};

/// A set of files written together.
#[derive(Default)]
pub struct OutputSet {
    /// Each output with its temporary file, in the order opened.
    staged: Vec<(Temp, PathBuf)>,
    inputs: Vec<PathBuf>,
}

/// Where an output's bytes wait for the commit.
enum Temp {
    /// None: a stream written in place.
    Stream,
    /// A hidden file beside the destination, registered for removal on a signal.
    Named(PathBuf),
    /// An `O_TMPFILE` file with no name yet (a handle kept open to name it).
    Unnamed(fs::File),
}

/// The prefix of a named temporary for the file called `name`.
fn temp_prefix(name: &str) -> String {
    format!(".{name}.rollstat-tmp-")
}

/// How long a named temporary of a process that is gone must have been left untouched
/// before another run removes it (on a shared file system the process may live on
/// another machine, still writing).
const STALE_SECS: u64 = 60;

/// Removes named temporaries for the file `name` in `dir` left by rollstat processes
/// that no longer run (killed with SIGKILL, or the machine stopped) and untouched for
/// [`STALE_SECS`]. Returns how many were removed.
pub fn sweep_stale(dir: &Path, name: &str) -> usize {
    let prefix = temp_prefix(name);
    let Ok(entries) = fs::read_dir(dir) else { return 0 };
    let mut n = 0;
    for e in entries.flatten() {
        let file_name = e.file_name();
        let Some(pid) = file_name.to_str().and_then(|f| f.strip_prefix(&prefix)).and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        if pid <= 0 || pid as u32 == std::process::id() {
            continue;
        }
        // SAFETY: kill with signal 0 only checks that the process exists.
        let gone =
            unsafe { libc::kill(pid, 0) } != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        let old = e
            .metadata()
            .ok()
            .filter(|m| m.is_file())
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age.as_secs() >= STALE_SECS);
        if gone && old && fs::remove_file(e.path()).is_ok() {
            n += 1;
        }
    }
    n
}

/// Whether temporaries may be opened with `O_TMPFILE` (named at commit through
/// `/proc/self/fd`): not when `ROLLSTAT_TMPFILE=0`, nor without `/proc`.
fn unnamed_allowed() -> bool {
    static ALLOWED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ALLOWED.get_or_init(|| {
        std::env::var_os("ROLLSTAT_TMPFILE").is_none_or(|v| v != "0") && Path::new("/proc/self/fd").is_dir()
    })
}

/// Opens a file with no name in `dir`, to write (and with `read`, to read back too);
/// `None` where the file system cannot.
fn open_unnamed(dir: &Path, read: bool) -> Option<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    if !unnamed_allowed() {
        return None;
    }
    fs::OpenOptions::new().read(read).write(true).mode(0o666).custom_flags(libc::O_TMPFILE).open(dir).ok()
}

/// A file to write and read back that no one else sees and nothing leaves behind: with
/// no name in `dir` where the file system allows, else created under a fresh name and
/// removed at once (it lives while open).
pub fn scratch_file(dir: &Path) -> std::io::Result<fs::File> {
    match open_unnamed(dir, true) {
        Some(f) => Ok(f),
        None => scratch_named(dir),
    }
}

/// [`scratch_file`] where no unnamed file can be had: a fresh name, removed at once.
fn scratch_named(dir: &Path) -> std::io::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    loop {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = dir.join(format!(".rollstat-scratch-{}-{n}", std::process::id()));
        match fs::OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).open(&path) {
            Ok(f) => {
                fs::remove_file(&path)?;
                return Ok(f);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Gives the unnamed file `f` the name `to` (which must not exist).
fn link_unnamed(f: &fs::File, to: &Path) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let from = std::ffi::CString::new(format!("/proc/self/fd/{}", f.as_raw_fd())).map_err(std::io::Error::other)?;
    let to = std::ffi::CString::new(to.as_os_str().as_encoded_bytes()).map_err(std::io::Error::other)?;
    // SAFETY: both are valid NUL-terminated paths; linkat only reads them.
    let r =
        unsafe { libc::linkat(libc::AT_FDCWD, from.as_ptr(), libc::AT_FDCWD, to.as_ptr(), libc::AT_SYMLINK_FOLLOW) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Puts the finished unnamed file `f` at `dest`: linked there directly when nothing is
/// there, else linked to a temporary name (registered in `reg` while it exists) and
/// renamed over the destination, so the path always holds a whole file.
fn place_unnamed(f: &fs::File, dest: &Path, reg: &mut crate::signals::Registry) -> std::io::Result<()> {
    if fs::symlink_metadata(dest).is_err() {
        match link_unnamed(f, dest) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    let name = dest.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = parent(dest).join(format!("{}{}", temp_prefix(&name), std::process::id()));
    let _ = fs::remove_file(&tmp);
    reg.add_temp(&tmp);
    let r = link_unnamed(f, &tmp).and_then(|()| fs::rename(&tmp, dest));
    if r.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    reg.remove_temp(&tmp);
    r
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
        crate::signals::check_cancelled()?;
        self.check(path)?;
        match target(path) {
            Target::Descriptor(fd) => {
                // SAFETY: dup has no memory preconditions; the new descriptor is ours
                // and owned by the returned File.
                let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
                if dup < 0 {
                    return Err(Error::write(path, std::io::Error::last_os_error()));
                }
                self.staged.push((Temp::Stream, path.to_path_buf()));
                // SAFETY: `dup` is a fresh descriptor nothing else owns.
                Ok((unsafe { <fs::File as std::os::fd::FromRawFd>::from_raw_fd(dup) }, false))
            }
            Target::Stream => {
                let f = fs::OpenOptions::new().write(true).open(path).map_err(|e| Error::write(path, e))?;
                self.staged.push((Temp::Stream, path.to_path_buf()));
                Ok((f, false))
            }
            Target::File(dest) => {
                let name = dest.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
                let dir = parent(&dest);
                sweep_stale(&dir, &name);
                if let Some(f) = open_unnamed(&dir, false) {
                    let keep = f.try_clone().map_err(|e| Error::write(&dest, e))?;
                    self.staged.push((Temp::Unnamed(keep), dest));
                    return Ok((f, true));
                }
                let tmp = dir.join(format!("{}{}", temp_prefix(&name), std::process::id()));
                // Registered before it exists, so no signal can strand it.
                crate::signals::registry().add_temp(&tmp);
                let f = fs::File::create(&tmp).map_err(|e| {
                    crate::signals::registry().remove_temp(&tmp);
                    // The folder exists (checked above): "not found" is a file system
                    // that makes no files there (/proc).
                    if refused(&e) || e.kind() == std::io::ErrorKind::NotFound {
                        Error::Usage(format!(
                            "{}: cannot create a file in {} ({e})",
                            dest.display(),
                            parent(&dest).display()
                        ))
                    } else {
                        Error::write(&tmp, e)
                    }
                })?;
                self.staged.push((Temp::Named(tmp), dest));
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
    /// The registry stays locked throughout: an interrupt waits for the renames to end.
    pub fn commit(mut self) -> Result<Vec<PathBuf>> {
        let mut done = Vec::new();
        let mut reg = crate::signals::registry();
        // A cancelled run commits nothing: dropping the set removes its temporaries.
        crate::signals::check_cancelled()?;
        while !self.staged.is_empty() {
            let (tmp, path) = &self.staged[0];
            // On failure the rest stay staged, so dropping the set removes their
            // temporary files.
            match tmp {
                Temp::Stream => {}
                Temp::Named(tmp) => {
                    fs::rename(tmp, path).map_err(|e| Error::write(path, e))?;
                    reg.remove_temp(tmp);
                    reg.add_written(path);
                }
                Temp::Unnamed(f) => {
                    place_unnamed(f, path, &mut reg).map_err(|e| Error::write(path, e))?;
                    reg.add_written(path);
                }
            }
            done.push(self.staged.remove(0).1);
        }
        Ok(done)
    }
}

impl Drop for OutputSet {
    fn drop(&mut self) {
        let mut reg = crate::signals::registry();
        for (tmp, _) in &self.staged {
            if let Temp::Named(tmp) = tmp {
                let _ = fs::remove_file(tmp);
                reg.remove_temp(tmp);
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

/// Whether an output at `path` goes into a file (rather than a descriptor, device or pipe).
pub fn is_file_output(path: &Path) -> bool {
    matches!(target(path), Target::File(_))
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
/// the folders this call made are removed again (those still empty), so a failed run
/// leaves nothing behind. Until `work` ends, an interrupt removes them too.
pub fn in_out_dir<T>(dir: &Path, work: impl FnOnce() -> Result<T>) -> Result<T> {
    in_out_dir_of(dir, Opt::named("out_dir"), work)
}

/// [`in_out_dir`] for a folder given as `opt` (named when it is not a folder).
pub fn in_out_dir_of<T>(dir: &Path, opt: Opt, work: impl FnOnce() -> Result<T>) -> Result<T> {
    let made = make_out_dir(dir, opt)?;
    let r = work();
    let mut reg = crate::signals::registry();
    for d in made.iter().rev() {
        if r.is_err() {
            let _ = fs::remove_dir(d);
        }
        reg.remove_dir(d);
    }
    r
}

/// Creates the output folder `dir` (and its parents) when it is not there; a path that
/// exists as something else is a usage error, not a failure of ours. Returns the folders
/// made, outermost first; they stay registered for removal on an interrupt. `opt` is
/// the option that named the folder.
pub fn make_out_dir(dir: &Path, opt: Opt) -> Result<Vec<PathBuf>> {
    if fs::metadata(dir).is_ok_and(|m| !m.is_dir()) {
        let msg = Msg::default().text(format!("{}: is not a folder; ", dir.display())).opt(opt);
        return Err(Error::refused(None, msg.text(" takes a folder")));
    }
    let mut made: Vec<PathBuf> =
        dir.ancestors().take_while(|a| !a.as_os_str().is_empty() && !a.exists()).map(Path::to_path_buf).collect();
    made.reverse();
    // Locked while creating, so an interrupt sees each folder registered once it exists.
    let mut reg = crate::signals::registry();
    for d in &made {
        reg.add_dir(d);
    }
    fs::create_dir_all(dir).map_err(|e| {
        for d in made.iter().rev() {
            let _ = fs::remove_dir(d);
            reg.remove_dir(d);
        }
        if refused(&e) {
            Error::Usage(format!("{}: cannot create the output folder ({e})", dir.display()))
        } else {
            Error::write(dir, e)
        }
    })?;
    Ok(made)
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

#[cfg(test)]
mod tests {
    use std::io::{Read, Seek, Write};

    #[test]
    fn scratch_files_hold_their_bytes_and_leave_no_name() {
        let dir = std::env::temp_dir().join(format!("rollstat-scratch-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for mut f in [super::scratch_file(&dir).unwrap(), super::scratch_named(&dir).unwrap()] {
            f.write_all(b"task entries").unwrap();
            f.rewind().unwrap();
            let mut back = String::new();
            f.read_to_string(&mut back).unwrap();
            assert_eq!(back, "task entries");
            assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "a scratch file has no name");
        }
        std::fs::remove_dir(&dir).unwrap();
    }
}
