//! Query results and their check: against another evaluation of the same query (exactly), and
//! against the specification's qualification answers at SF 1 (shipped by `tpchgen`'s
//! `q_and_a`), with the specification's tolerances (clause 2.1.3.5): keys and counts exact,
//! sums within 100 currency units, averages and ratios within 1% after rounding to 1/100th.

use serde::Serialize;

/// How a column is compared (clause 2.1.3.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Kind {
    /// A grouping column or singleton value: exact.
    Key,
    /// COUNT: exact.
    Count,
    /// SUM of money: within 100 currency units.
    Sum,
    /// AVG or a ratio: within 1% once rounded to 1/100th.
    Ratio,
}

/// One value of a result row.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Cell {
    Str(String),
    Int(i64),
    /// An exact decimal: `value / 10^scale`.
    Dec { value: i128, scale: u8 },
    /// A computed ratio or average.
    Num(f64),
}

impl Cell {
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Cell::Str(s) => s.trim().parse().ok(),
            Cell::Int(v) => Some(*v as f64),
            Cell::Dec { value, scale } => Some(*value as f64 / 10f64.powi(i32::from(*scale))),
            Cell::Num(v) => Some(*v),
        }
    }
    /// The value as the answer files print it.
    pub fn text(&self) -> String {
        match self {
            Cell::Str(s) => s.trim_end().to_string(),
            Cell::Int(v) => v.to_string(),
            Cell::Dec { scale, .. } => {
                format!("{:.*}", usize::from(*scale), self.as_f64().unwrap_or(0.0))
            }
            Cell::Num(v) => format!("{v:.2}"),
        }
    }
}

/// A query's result: column names and kinds, rows in the query's ORDER BY.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QueryResult {
    pub columns: Vec<(&'static str, Kind)>,
    pub rows: Vec<Vec<Cell>>,
}

/// How strictly `compare` compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tolerance {
    /// Two evaluations of the same integer arithmetic: keys, counts and sums equal, ratios
    /// within 1e-9 relative (floating-point summation order).
    Exact,
    /// The specification's (clause 2.1.3.5).
    Spec,
}

fn cell_matches(kind: Kind, want: &Cell, got: &Cell, tol: Tolerance) -> bool {
    let (w, g) = (want.as_f64(), got.as_f64());
    match (kind, tol) {
        (Kind::Key, _) => want.text().trim() == got.text().trim() || (w.is_some() && w == g),
        (Kind::Count, _) => w.is_some() && w == g,
        (Kind::Sum, Tolerance::Exact) => match (want, got) {
            (Cell::Dec { .. }, Cell::Dec { .. }) => want == got,
            _ => w.is_some() && w == g,
        },
        (Kind::Sum, Tolerance::Spec) => match (w, g) {
            (Some(w), Some(g)) => (w - g).abs() <= 100.0,
            _ => false,
        },
        (Kind::Ratio, Tolerance::Exact) => match (w, g) {
            (Some(w), Some(g)) => (w - g).abs() <= 1e-9 * w.abs().max(1.0),
            _ => false,
        },
        (Kind::Ratio, Tolerance::Spec) => match (w, g) {
            (Some(w), Some(g)) => {
                let r = (g * 100.0).round() / 100.0;
                (r - w).abs() <= 0.01 * w.abs() + 1e-9
            }
            _ => false,
        },
    }
}

/// Compares `got` with `want` row by row; the first difference, or Ok.
pub fn compare(want: &QueryResult, got: &QueryResult, tol: Tolerance) -> Result<(), String> {
    if want.columns.len() != got.columns.len() {
        return Err(format!(
            "{} columns, expected {}",
            got.columns.len(),
            want.columns.len()
        ));
    }
    if want.rows.len() != got.rows.len() {
        return Err(format!(
            "{} rows, expected {}",
            got.rows.len(),
            want.rows.len()
        ));
    }
    for (i, (w, g)) in want.rows.iter().zip(&got.rows).enumerate() {
        for (c, (&(name, _), (wc, gc))) in got.columns.iter().zip(w.iter().zip(g)).enumerate() {
            let kind = got.columns[c].1;
            if !cell_matches(kind, wc, gc, tol) {
                return Err(format!(
                    "row {i} column {name}: {} where {} is expected",
                    gc.text(),
                    wc.text()
                ));
            }
        }
    }
    Ok(())
}

/// The specification's answer to query `q` at SF 1 with the validation parameters, as a result
/// with the columns of `like` (the answer files hold text; the kinds come from our query).
pub fn sf1_answer(q: u32, like: &QueryResult) -> Option<QueryResult> {
    let text = tpchgen::q_and_a::answers_sf1::answer(i32::try_from(q).ok()?)?;
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header = lines.next()?;
    if header.split('|').count() != like.columns.len() {
        return None;
    }
    let rows = lines
        .map(|l| l.split('|').map(|c| Cell::Str(c.trim().to_string())).collect())
        .collect();
    Some(QueryResult {
        columns: like.columns.clone(),
        rows,
    })
}
