//! Typed errors of the engine. No user input (DDL, configs, rows) may panic: it returns one of
//! these.

use crate::{Lsn, PageId};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    #[error("storage I/O: {0}")]
    Io(String),
    #[error("page {pid} is corrupt: {why}")]
    Corrupt { pid: PageId, why: String },
    #[error("log is corrupt at LSN {lsn}: {why}")]
    LogCorrupt { lsn: Lsn, why: String },
    #[error("the log is full ({used_bytes} of {capacity_bytes} bytes held by active transactions or unflushed pages)")]
    LogFull {
        used_bytes: u64,
        capacity_bytes: u64,
    },
    #[error("the database is full: no free page among {pages}")]
    NoSpace { pages: u64 },
    #[error("record of {bytes} bytes does not fit in a page ({max} bytes at most)")]
    RecordTooLarge { bytes: usize, max: usize },
    #[error("record {0:?} does not exist")]
    NoSuchRecord(crate::Rid),
    #[error("duplicate key in unique index '{index}'")]
    DuplicateKey { index: String },
    #[error("the transaction must wait for a lock held by transaction {holder}")]
    WouldBlock { holder: u64 },
    #[error("deadlock: transaction {victim} was chosen as the victim")]
    Deadlock { victim: u64 },
    #[error("transaction {0} is not active")]
    NoSuchTxn(u64),
    #[error("{kind} '{name}' does not exist")]
    NotFound { kind: &'static str, name: String },
    #[error("{kind} '{name}' already exists")]
    AlreadyExists { kind: &'static str, name: String },
    #[error("DDL error at {line}:{column}: {message}")]
    Ddl {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("value does not match the schema: {0}")]
    Schema(String),
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("not supported: {0}")]
    Unsupported(String),
    #[error("the engine stopped after an earlier I/O error ({0}); reopen it to recover")]
    Failed(String),
    #[error("recovery failed: {0}")]
    Recovery(String),
}

impl From<ftl::FtlError> for Error {
    fn from(e: ftl::FtlError) -> Self {
        Error::Io(e.to_string())
    }
}

impl Error {
    /// Errors after which the transaction may simply be retried (lock conflicts).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::WouldBlock { .. } | Error::Deadlock { .. })
    }
}

pub type Result<T> = std::result::Result<T, Error>;
