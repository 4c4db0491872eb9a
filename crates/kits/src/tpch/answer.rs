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
    Dec {
        value: i128,
        scale: u8,
    },
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
        .map(|l| {
            l.split('|')
                .map(|c| Cell::Str(c.trim().to_string()))
                .collect()
        })
        .collect();
    Some(QueryResult {
        columns: like.columns.clone(),
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(kind: Kind, cell: Cell) -> QueryResult {
        QueryResult {
            columns: vec![("x", kind)],
            rows: vec![vec![cell]],
        }
    }

    #[test]
    fn the_specification_tolerances_apply_per_column_kind() {
        // Q14's answer is a ratio: 16.38 within 1% after rounding to 1/100th.
        let like = one(Kind::Ratio, Cell::Num(0.0));
        let want = sf1_answer(14, &like).expect("Q14 has an SF 1 answer");
        assert!(compare(&want, &one(Kind::Ratio, Cell::Num(16.381)), Tolerance::Spec).is_ok());
        assert!(compare(&want, &one(Kind::Ratio, Cell::Num(16.5)), Tolerance::Spec).is_ok());
        assert!(compare(&want, &one(Kind::Ratio, Cell::Num(16.6)), Tolerance::Spec).is_err());
        // Q6's answer is a sum: within 100 currency units.
        let like = one(Kind::Sum, Cell::Num(0.0));
        let want = sf1_answer(6, &like).expect("Q6 has an SF 1 answer");
        let dec = |value| Cell::Dec { value, scale: 4 };
        assert!(compare(
            &want,
            &one(Kind::Sum, dec(1_231_410_782_300 + 990_000)),
            Tolerance::Spec
        )
        .is_ok());
        assert!(compare(
            &want,
            &one(Kind::Sum, dec(1_231_410_782_300 + 1_010_000)),
            Tolerance::Spec
        )
        .is_err());
        // Counts are exact, whatever the tolerance.
        let want = one(Kind::Count, Cell::Str("6202".into()));
        assert!(compare(&want, &one(Kind::Count, Cell::Int(6202)), Tolerance::Spec).is_ok());
        assert!(compare(&want, &one(Kind::Count, Cell::Int(6203)), Tolerance::Spec).is_err());
        // A result of another shape is refused with the reason.
        let two_rows = QueryResult {
            columns: vec![("x", Kind::Count)],
            rows: vec![vec![Cell::Int(1)], vec![Cell::Int(2)]],
        };
        assert!(compare(&want, &two_rows, Tolerance::Spec)
            .unwrap_err()
            .contains("rows"));
    }

    #[test]
    fn the_sf1_answers_have_the_columns_of_our_queries() {
        for (q, cols) in [(1, 10), (6, 1), (12, 3), (14, 1)] {
            let like = QueryResult {
                columns: vec![("x", Kind::Key); cols],
                rows: vec![],
            };
            let a = sf1_answer(q, &like).expect("an answer");
            assert!(!a.rows.is_empty());
            assert!(a.rows.iter().all(|r| r.len() == cols));
        }
    }
}
