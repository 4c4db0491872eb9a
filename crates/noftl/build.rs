//! Puts the commit and the build date into `noftl --version` (and every result file's
//! `version`), so a figure names the code that made it. Without git (a source tarball) the
//! commit is "unknown"; the date is the commit's (reproducible builds), or "unknown".

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !s.is_empty()).then_some(s)
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    // A tree with uncommitted changes says so: its figures are not the commit's.
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some();
    let date = git(&["log", "-1", "--format=%cs"]).unwrap_or_else(|| "unknown".into());
    let commit = if dirty {
        format!("{commit}-modified")
    } else {
        commit
    };
    println!("cargo:rustc-env=NOFTL_COMMIT={commit}");
    println!("cargo:rustc-env=NOFTL_COMMIT_DATE={date}");
    // Rebuild when HEAD moves or the index changes (a commit, a checkout, a staged edit).
    for p in ["../../.git/HEAD", "../../.git/index"] {
        if std::path::Path::new(p).exists() {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
