//! The one rule for every file the tool writes: `--json`, `--stats-file`, `noftl plot --out`,
//! `sweep merge --csv`, result and sweep directories, man pages.
//!
//! Why: a result path is user input. Written with `fs::write` (or write-then-rename over
//! `PATH.tmp`), `--stats-file /dev/full` run as root turned the device node into a JSON file, a
//! directory path left a stray `NAME.tmp`, and an unwritable path was found only at exit, after
//! the work was done. Then (issue 32): `serve --image a.img --stats-file a.img` replaced the
//! image by its statistics at shutdown (`mount` too); `bench --json a.img` replaced the image of
//! a running server, which went on acknowledging FLUSH into a file nobody could reach any more;
//! `sweep merge --csv FIFO` hung; results were written among the files of a non-empty directory
//! without a word.
//!
//! Invariants:
//! 1. Only a regular file (or nothing) is ever replaced: a device, a directory, a FIFO or a
//!    socket at the path is refused before anything is written. A symbolic link is resolved
//!    (up to 40 in a row) and its target judged and written, the link kept: a link to a FIFO is
//!    a FIFO.
//! 2. A result never replaces a file this run reads or owns: an input the verb declared
//!    ([`protect`]) or a file this process holds locked (`filelock::hold`: images, databases).
//!    Files are compared by device and inode, so no hard or symbolic link hides one; by their
//!    resolved path when one of them does not exist yet.
//! 3. Nor a file another process holds locked: a running noftl's `--image` or `--path`
//!    (`filelock::holder`).
//! 4. The data goes to a temporary file in the target's directory (so the rename cannot cross
//!    file systems), then replaces the target in one rename: a reader sees the old file or the
//!    new one, never half of one. The temporary file is removed on every path that does not
//!    rename it (`tempfile`'s drop).
//! 5. [`check_writable`] judges a path (1 to 3, and that its directory takes a file) at
//!    start-up, before the work; [`write_atomic`] judges it again when it writes, since a server
//!    may have started on that file in between.
//! 6. A result directory that holds anything is refused unless forced ([`check_results_dir`]):
//!    the new run's files would replace some of the old ones and sit among the others.
//! 7. A stream that cannot be renamed into place (a child's standard output) is created new in
//!    a directory this run has just made ([`create_fresh`]: nothing there is followed or
//!    replaced).

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A result path that cannot take a result.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("{path} exists and is {kind}, not a regular file: results are written only to regular files")]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("refusing to write {path}: it is the same file as {flag} {input}, which the result would destroy; choose another path")]
    SameAsInput {
        path: PathBuf,
        flag: &'static str,
        input: PathBuf,
    },
    #[error("refusing to write {path}: {holder} holds it locked (a noftl image or database in use); replacing it would lose what is written to it")]
    Locked { path: PathBuf, holder: String },
    #[error("{flag} {dir} is not empty: the results would mix with what it holds; give --force to write into it anyway (files of the same names are replaced), or choose a new or empty directory")]
    NotEmpty { flag: &'static str, dir: PathBuf },
    #[error("{flag} {dir} exists and is not a directory: a result directory is written there")]
    NotADirectory { flag: &'static str, dir: PathBuf },
    #[error("{path}: more than 40 symbolic links in a row")]
    LinkLoop { path: PathBuf },
    #[error("cannot write {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn io_error(path: &Path) -> impl Fn(std::io::Error) -> OutputError + '_ {
    move |source| OutputError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Invariant 1: the file a path names once its symbolic links are followed (the path itself
/// when it is not a link, or names nothing).
fn resolve_links(path: &Path) -> Result<PathBuf, OutputError> {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&p).map_err(io_error(path))?;
                p = if target.is_absolute() {
                    target
                } else {
                    dir_of(&p).join(target)
                };
            }
            _ => return Ok(p),
        }
    }
    Err(OutputError::LinkLoop {
        path: path.to_path_buf(),
    })
}

/// An absolute spelling of `path` with its directory's links resolved: two paths to one file
/// that does not exist yet compare equal.
fn normalize(path: &Path) -> PathBuf {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    match (abs.parent(), abs.file_name()) {
        (Some(dir), Some(name)) => std::fs::canonicalize(dir)
            .map(|d| d.join(name))
            .unwrap_or(abs.clone()),
        _ => abs,
    }
}

/// A declared input (invariant 2): the flag and path as given, and the path resolved. Its
/// identity is looked up at each check, never kept: a file deleted since may have left its
/// inode number to another one.
#[derive(Debug)]
struct Protected {
    flag: &'static str,
    given: PathBuf,
    normal: PathBuf,
}

static PROTECTED: Mutex<Vec<Protected>> = Mutex::new(Vec::new());

fn identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Declares `path` (given with `flag`) a file this run reads or owns: no result of this
/// process may replace it (invariant 2). A path that does not exist yet (an image about to be
/// created) is matched by its resolved path until it does.
pub fn protect(flag: &'static str, path: &Path) {
    let target = resolve_links(path).unwrap_or_else(|_| path.to_path_buf());
    let entry = Protected {
        flag,
        given: path.to_path_buf(),
        normal: normalize(&target),
    };
    let mut all = PROTECTED.lock().unwrap_or_else(|p| p.into_inner());
    if !all.iter().any(|e| e.normal == entry.normal) {
        all.push(entry);
    }
}

/// Invariant 2: the declared input that `target` (resolved, its identity `id` if it exists)
/// is, if any.
fn protected_match(target: &Path, id: Option<(u64, u64)>) -> Option<(&'static str, PathBuf)> {
    let normal = normalize(target);
    let all = PROTECTED.lock().unwrap_or_else(|p| p.into_inner());
    all.iter()
        .find(|e| e.normal == normal || (id.is_some() && identity(&e.normal) == id))
        .map(|e| (e.flag, e.given.clone()))
}

/// Invariants 1 to 3 for `path`: the file to write (its links resolved), or why not.
fn judge(path: &Path) -> Result<PathBuf, OutputError> {
    let target = resolve_links(path)?;
    let meta = match std::fs::metadata(&target) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => return Err(io_error(path)(source)),
    };
    if let Some(m) = meta.as_ref().filter(|m| !m.is_file()) {
        return Err(OutputError::NotRegular {
            path: path.to_path_buf(),
            kind: kind_of(m),
        });
    }
    let id = meta.as_ref().map(|m| (m.dev(), m.ino()));
    if let Some((flag, input)) = protected_match(&target, id) {
        return Err(OutputError::SameAsInput {
            path: path.to_path_buf(),
            flag,
            input,
        });
    }
    if let Some(holder) = meta
        .as_ref()
        .and_then(|m| crate::filelock::holder(&target, m))
    {
        return Err(OutputError::Locked {
            path: path.to_path_buf(),
            holder,
        });
    }
    Ok(target)
}

fn temp_next_to(target: &Path, shown: &Path) -> Result<tempfile::NamedTempFile, OutputError> {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    use std::os::unix::fs::PermissionsExt;
    tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        // A temporary file is private (0600) by default; a result is as readable as any file
        // the user creates (0666 less the umask).
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir_of(target))
        .map_err(io_error(shown))
}

/// Invariant 5: `path` ("-" is standard output) could take a result now. Creates and removes a
/// temporary file next to it.
pub fn check_writable(path: &Path) -> Result<(), OutputError> {
    if path.as_os_str() == "-" {
        return Ok(());
    }
    let target = judge(path)?;
    drop(temp_next_to(&target, path)?);
    Ok(())
}

/// Writes `bytes` to `path` (invariants 1 to 5).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), OutputError> {
    let target = judge(path)?;
    let io = io_error(path);
    let mut tmp = temp_next_to(&target, path)?;
    tmp.write_all(bytes).map_err(&io)?;
    tmp.as_file().sync_data().map_err(&io)?;
    tmp.persist(&target).map_err(|e| io(e.error))?; // on failure the drop removes it
    Ok(())
}

/// Invariant 6: the result directory `dir` (given with `flag`) may take a run's files: it does
/// not exist yet (the run creates it), or it is an empty directory, or `force` says to write
/// into it anyway.
pub fn check_results_dir(flag: &'static str, dir: &Path, force: bool) -> Result<(), OutputError> {
    match std::fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(io_error(dir)(source)),
        Ok(m) if !m.is_dir() => Err(OutputError::NotADirectory {
            flag,
            dir: dir.to_path_buf(),
        }),
        Ok(_) => {
            let mut entries = std::fs::read_dir(dir).map_err(io_error(dir))?;
            if entries.next().is_some() && !force {
                return Err(OutputError::NotEmpty {
                    flag,
                    dir: dir.to_path_buf(),
                });
            }
            Ok(())
        }
    }
}

/// Invariant 7: a new file at `path` for a stream, in a directory the caller has just created;
/// an entry already there (a file, a link) is an error, never followed or replaced.
pub fn create_fresh(path: &Path) -> Result<std::fs::File, OutputError> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(io_error(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .expect("dir")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect()
    }

    #[test]
    fn results_replace_regular_files_only_and_leave_no_temporary_file() {
        let d = tempfile::tempdir().expect("tempdir");
        let f = d.path().join("r.json");
        write_atomic(&f, b"one").expect("write");
        write_atomic(&f, b"two").expect("rewrite");
        assert_eq!(std::fs::read(&f).expect("read"), b"two");
        let sub = d.path().join("sub");
        std::fs::create_dir(&sub).expect("mkdir");
        let e = write_atomic(&sub, b"x").expect_err("a directory");
        assert!(e.to_string().contains("is a directory"), "{e}");
        assert!(check_writable(Path::new("/dev/null")).is_err());
        assert!(check_writable(&d.path().join("missing/x.json")).is_err());
        assert!(check_writable(&d.path().join("new.json")).is_ok());
        assert!(leftovers(d.path()).is_empty());
    }

    #[test]
    fn a_link_is_resolved_its_target_judged_and_written_and_the_link_kept() {
        let d = tempfile::tempdir().expect("tempdir");
        let target = d.path().join("target.csv");
        std::fs::write(&target, b"old").expect("write");
        let link = d.path().join("link.csv");
        std::os::unix::fs::symlink("target.csv", &link).expect("symlink");
        write_atomic(&link, b"new").expect("through the link");
        assert!(std::fs::symlink_metadata(&link)
            .expect("link")
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(&target).expect("read"), b"new");
        let to_dir = d.path().join("to-dir");
        std::os::unix::fs::symlink(d.path(), &to_dir).expect("symlink");
        let e = check_writable(&to_dir).expect_err("a link to a directory");
        assert!(e.to_string().contains("is a directory"), "{e}");
        let a = d.path().join("a");
        std::os::unix::fs::symlink("b", &a).expect("symlink");
        std::os::unix::fs::symlink("a", d.path().join("b")).expect("symlink");
        let e = check_writable(&a).expect_err("a loop");
        assert!(e.to_string().contains("symbolic links"), "{e}");
    }

    #[test]
    fn an_input_is_never_replaced_through_any_link_or_before_it_exists() {
        let d = tempfile::tempdir().expect("tempdir");
        let img = d.path().join("a.img");
        std::fs::write(&img, b"flash").expect("write");
        protect("--image", &img);
        let hard = d.path().join("hard.json");
        std::fs::hard_link(&img, &hard).expect("hard link");
        let soft = d.path().join("soft.json");
        std::os::unix::fs::symlink(&img, &soft).expect("symlink");
        for p in [&img, &hard, &soft] {
            let e = write_atomic(p, b"{}").expect_err("the image");
            assert!(e.to_string().contains("same file as --image"), "{e}");
        }
        assert_eq!(std::fs::read(&img).expect("read"), b"flash");
        // An image that is created only later is matched by its path, then by its inode.
        let later = d.path().join("later.img");
        protect("--image", &later);
        let spelled = d.path().join(".").join("later.img");
        assert!(check_writable(&spelled).is_err());
        std::fs::write(&later, b"flash").expect("create");
        let alias = d.path().join("alias");
        std::fs::hard_link(&later, &alias).expect("hard link");
        assert!(check_writable(&alias).is_err());
        assert!(check_writable(&d.path().join("other.json")).is_ok());
    }

    #[test]
    fn a_file_locked_by_another_process_is_not_replaced() {
        use std::os::unix::io::AsRawFd;
        let d = tempfile::tempdir().expect("tempdir");
        let img = d.path().join("served.img");
        let other = std::fs::File::create(&img).expect("create");
        // Another open file description stands for another process (flock is per description).
        // SAFETY: flock on a valid descriptor owned by `other`.
        assert_eq!(
            unsafe { libc::flock(other.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) },
            0
        );
        let e = check_writable(&img).expect_err("locked");
        assert!(e.to_string().contains("holds it locked"), "{e}");
        assert!(write_atomic(&img, b"{}").is_err());
        drop(other);
        write_atomic(&img, b"{}").expect("free now");
    }

    #[test]
    fn a_result_directory_must_be_new_or_empty_unless_forced() {
        let d = tempfile::tempdir().expect("tempdir");
        let dir = d.path().join("res");
        check_results_dir("--results", &dir, false).expect("new");
        std::fs::create_dir(&dir).expect("mkdir");
        check_results_dir("--results", &dir, false).expect("empty");
        std::fs::write(dir.join("summary.json"), b"{}").expect("write");
        let e = check_results_dir("--results", &dir, false).expect_err("not empty");
        assert!(e.to_string().contains("is not empty"), "{e}");
        check_results_dir("--results", &dir, true).expect("forced");
        let e =
            check_results_dir("--results", &dir.join("summary.json"), true).expect_err("a file");
        assert!(e.to_string().contains("not a directory"), "{e}");
        let fresh = dir.join("stdout.txt");
        create_fresh(&fresh).expect("new");
        assert!(
            create_fresh(&fresh).is_err(),
            "never over an existing entry"
        );
    }
}
