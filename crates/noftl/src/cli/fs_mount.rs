//! Moved: the mount machinery of the file-system experiments is
//! `lab::experiments::fs_mount`. This empty module stays until `cli/mod.rs` drops its line.
