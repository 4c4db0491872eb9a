//! Benchmark kits written as code against the storage manager API, as in shore-kits.
//!
//! Each kit keeps input generation apart from execution: an input generator turns a seed into
//! the transactions' parameters, and terminals execute them step by step on the engine, in
//! virtual time (the deterministic scheduler of `storage::sched`) or in real time (threads).

mod batch;
pub mod crash;
mod crash_common;
pub mod crash_iaa;
pub mod crash_native;
mod crash_tpcb;
pub mod iaa;
pub mod iaa_paper;
mod settle;
pub mod tatp;
pub mod tpcb;
pub mod tpcc;
pub mod tpch;

/// How a kit's population goes into the engine (batch.rs says how each works).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LoadMethod {
    /// `storage::bulk`: dense heap pages, B+-trees built bottom-up, one redo record per page.
    #[default]
    Bulk,
    /// One logged insert per row and index, a commit every 2,000 rows: the only loader before
    /// 2026-11-27 (every TPC-B and TPC-C figure published before then used it).
    Rows,
}

impl LoadMethod {
    pub fn name(self) -> &'static str {
        match self {
            LoadMethod::Bulk => "bulk",
            LoadMethod::Rows => "rows",
        }
    }
}

impl std::fmt::Display for LoadMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for LoadMethod {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "bulk" => Ok(LoadMethod::Bulk),
            "rows" => Ok(LoadMethod::Rows),
            other => Err(format!("a load is bulk or rows, not '{other}'")),
        }
    }
}

/// Pages for `rows` rows of `bytes_per_row` measured page space each on pages of `page_bytes`,
/// plus 64 for the catalog and the first pages of every table and index.
pub(crate) fn pages_for(rows: u64, bytes_per_row: u64, page_bytes: usize) -> u64 {
    assert!(page_bytes > 0, "a page has a size");
    rows.saturating_mul(bytes_per_row) / page_bytes as u64 + 64
}

/// A kit's DDL with `tables` moved into a tablespace of their own on a new NoFTL region
/// (`CREATE REGION region (options)`; the tablespace is named `ts_` + region): how a layout
/// chosen by hand (IPA Table I's) or by the IPA advisor is applied to any kit. A table's indexes
/// follow it (an index lives in its table's tablespace). Every named table must be in the DDL.
pub fn place_tables(
    ddl: &str,
    tables: &[&str],
    region: &str,
    options: &str,
) -> storage::Result<String> {
    let ts = format!("ts_{region}");
    let mut out = format!(
        "CREATE REGION {region} ({options});\nCREATE TABLESPACE {ts} (REGION={region}, EXTENT_SIZE=128K);\n"
    );
    let mut found = vec![false; tables.len()];
    for stmt in ddl.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        let name = stmt
            .strip_prefix("CREATE TABLE ")
            .and_then(|rest| rest.split([' ', '(']).next());
        let moved = name.and_then(|n| tables.iter().position(|t| t.eq_ignore_ascii_case(n)));
        match (moved, stmt.rfind(") TABLESPACE ")) {
            (Some(i), Some(at)) => {
                found[i] = true;
                out.push_str(&stmt[..at]);
                out.push_str(&format!(") TABLESPACE {ts};\n"));
            }
            (Some(i), None) => {
                found[i] = true;
                out.push_str(&format!("{stmt} TABLESPACE {ts};\n"));
            }
            (None, _) => {
                out.push_str(stmt);
                out.push_str(";\n");
            }
        }
    }
    if let Some(i) = found.iter().position(|f| !f) {
        return Err(storage::Error::Config(format!(
            "table {} is not in the workload's schema",
            tables[i]
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn place_tables_moves_the_named_tables_and_refuses_unknown_ones() {
        let ddl = "CREATE TABLESPACE k;\nCREATE TABLE a (x INT) TABLESPACE k;\nCREATE TABLE b (y INT,\n z INT) TABLESPACE k;\nCREATE UNIQUE INDEX a_pk ON a (x);\n";
        let out = super::place_tables(ddl, &["b"], "rg", "MAX_CHIPS=1").unwrap();
        assert!(
            out.starts_with("CREATE REGION rg (MAX_CHIPS=1);\nCREATE TABLESPACE ts_rg (REGION=rg")
        );
        assert!(
            out.contains("CREATE TABLE a (x INT) TABLESPACE k;"),
            "{out}"
        );
        assert!(
            out.contains("CREATE TABLE b (y INT,\n z INT) TABLESPACE ts_rg;"),
            "{out}"
        );
        assert!(out.contains("CREATE UNIQUE INDEX a_pk ON a (x);"), "{out}");
        assert!(super::place_tables(ddl, &["c"], "rg", "MAX_CHIPS=1").is_err());
    }
}
