//! Result files (`--json`, `--stats-file`, plots, a sweep's job files) written safely.
//!
//! Why: a result path is user input. Written with `fs::write` (or write-then-rename over
//! `PATH.tmp`), `--stats-file /dev/full` run as root turned the device node into a JSON file, a
//! directory path left a stray `NAME.tmp`, and an unwritable path was found only at exit, after
//! the work was done.
//!
//! Invariants:
//! 1. Only a regular file (or nothing) is ever replaced: a device, a directory, a FIFO or a
//!    socket at the path is refused before anything is written.
//! 2. The data goes to a temporary file in the target's directory (so the rename cannot cross
//!    file systems), then replaces the target in one rename: a reader sees the old file or the
//!    new one, never half of one.
//! 3. The temporary file is removed on every path that does not rename it (`tempfile`'s drop).
//! 4. [`check_writable`] runs at start-up: a path that cannot be written is refused before the
//!    work, with the reason.

use std::io::Write;
use std::path::{Path, PathBuf};

/// A result path that cannot take a result.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("{path} exists and is {kind}, not a regular file: results are written only to regular files")]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("cannot write {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
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

/// Invariant 1: refuses a path holding anything but a regular file (symbolic links followed:
/// a link to a device is refused too).
fn refuse_non_regular(path: &Path) -> Result<(), OutputError> {
    match std::fs::metadata(path) {
        Ok(meta) if !meta.is_file() => Err(OutputError::NotRegular {
            path: path.to_path_buf(),
            kind: kind_of(&meta),
        }),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(OutputError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

fn temp_next_to(path: &Path) -> Result<tempfile::NamedTempFile, OutputError> {
    let name = path
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
        .tempfile_in(dir_of(path))
        .map_err(|source| OutputError::Io {
            path: path.to_path_buf(),
            source,
        })
}

/// Invariant 4: `path` ("-" is standard output) could take a result now. Creates and removes a
/// temporary file next to it.
pub fn check_writable(path: &Path) -> Result<(), OutputError> {
    if path.as_os_str() == "-" {
        return Ok(());
    }
    refuse_non_regular(path)?;
    drop(temp_next_to(path)?);
    Ok(())
}

/// Writes `bytes` to `path` (invariants 1 to 3).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), OutputError> {
    refuse_non_regular(path)?;
    let io = |source| OutputError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut tmp = temp_next_to(path)?;
    tmp.write_all(bytes).map_err(io)?;
    tmp.as_file().sync_data().map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?; // on failure the drop removes it (invariant 3)
    Ok(())
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
}
