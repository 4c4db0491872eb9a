//! Typed rows: a schema per table, values, and the row format.
//!
//! Row format: fixed-width columns first, in schema order, then each variable-length column as a
//! 2-byte little-endian length and its bytes.
//!
//! | type | bytes | encoding |
//! |---|---|---|
//! | INT | 4 | i32 little-endian |
//! | BIGINT | 8 | i64 little-endian |
//! | MONEY | 8 | i64 little-endian, integer cents |
//! | DATE | 4 | i32 little-endian, days since 1970-01-01 |
//! | CHAR(n) | n | UTF-8, padded with spaces |
//! | VARCHAR(n) | 2 + len | u16 length, UTF-8 bytes (len <= n) |
//!
//! No NULLs: every column is NOT NULL.
//!
//! Invariants:
//! 1. `decode(encode(v)) == v` for every row that `encode` accepts (CHAR values come back
//!    padded to their width).
//! 2. A fixed-width column of a row lies at `fixed_offset(col)` whatever the other values, so
//!    it can be read and updated in place.

use crate::error::{Error, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ColType {
    Int,
    BigInt,
    Money,
    Date,
    Char(u16),
    Varchar(u16),
}

impl ColType {
    /// Width in the fixed part, or None for VARCHAR.
    pub fn fixed_width(self) -> Option<usize> {
        match self {
            ColType::Int | ColType::Date => Some(4),
            ColType::BigInt | ColType::Money => Some(8),
            ColType::Char(n) => Some(n as usize),
            ColType::Varchar(_) => None,
        }
    }
    pub fn code(self) -> (u8, u16) {
        match self {
            ColType::Int => (1, 0),
            ColType::BigInt => (2, 0),
            ColType::Money => (3, 0),
            ColType::Date => (4, 0),
            ColType::Char(n) => (5, n),
            ColType::Varchar(n) => (6, n),
        }
    }
    pub fn from_code(c: u8, n: u16) -> Option<ColType> {
        Some(match c {
            1 => ColType::Int,
            2 => ColType::BigInt,
            3 => ColType::Money,
            4 => ColType::Date,
            5 => ColType::Char(n),
            6 => ColType::Varchar(n),
            _ => return None,
        })
    }
}

impl std::fmt::Display for ColType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ColType::Int => write!(f, "INT"),
            ColType::BigInt => write!(f, "BIGINT"),
            ColType::Money => write!(f, "MONEY"),
            ColType::Date => write!(f, "DATE"),
            ColType::Char(n) => write!(f, "CHAR({n})"),
            ColType::Varchar(n) => write!(f, "VARCHAR({n})"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Column {
    pub name: String,
    pub ty: ColType,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Value {
    /// INT and BIGINT.
    Int(i64),
    /// Integer cents.
    Money(i64),
    /// Days since 1970-01-01.
    Date(i32),
    Str(String),
}

impl Value {
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(v) | Value::Money(v) => Some(*v),
            Value::Date(d) => Some(i64::from(*d)),
            Value::Str(_) => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
pub fn days_from_civil(y: i32, m: u32, d: u32) -> i32 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m as i32 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i32 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Schema {
    pub columns: Vec<Column>,
    /// Offset of each fixed column in the row (None for VARCHAR).
    offsets: Vec<Option<usize>>,
    fixed_bytes: usize,
}

impl Schema {
    pub fn new(columns: Vec<Column>) -> Result<Schema> {
        if columns.is_empty() {
            return Err(Error::Schema("a table needs at least one column".into()));
        }
        let mut seen = std::collections::BTreeSet::new();
        let mut offsets = Vec::with_capacity(columns.len());
        let mut at = 0usize;
        for c in &columns {
            if !seen.insert(c.name.to_ascii_lowercase()) {
                return Err(Error::Schema(format!("column '{}' appears twice", c.name)));
            }
            match c.ty {
                ColType::Char(0) | ColType::Varchar(0) => {
                    return Err(Error::Schema(format!(
                        "column '{}' has zero length",
                        c.name
                    )))
                }
                _ => {}
            }
            match c.ty.fixed_width() {
                Some(w) => {
                    offsets.push(Some(at));
                    at += w;
                }
                None => offsets.push(None),
            }
        }
        Ok(Schema {
            columns,
            offsets,
            fixed_bytes: at,
        })
    }
    pub fn col(&self, name: &str) -> Option<usize> {
        self.columns
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name))
    }
    pub fn fixed_offset(&self, col: usize) -> Option<usize> {
        self.offsets.get(col).copied().flatten()
    }

    pub fn encode(&self, row: &[Value]) -> Result<Vec<u8>> {
        if row.len() != self.columns.len() {
            return Err(Error::Schema(format!(
                "{} values for {} columns",
                row.len(),
                self.columns.len()
            )));
        }
        let mut out = vec![0u8; self.fixed_bytes];
        for (i, (c, v)) in self.columns.iter().zip(row).enumerate() {
            let bad = || Error::Schema(format!("column '{}' ({}) cannot hold {v:?}", c.name, c.ty));
            match (c.ty, v) {
                (ColType::Int, Value::Int(x)) => {
                    let x = i32::try_from(*x).map_err(|_| bad())?;
                    let o = self.offsets[i].unwrap_or(0);
                    out[o..o + 4].copy_from_slice(&x.to_le_bytes());
                }
                (ColType::BigInt, Value::Int(x))
                | (ColType::Money, Value::Money(x))
                | (ColType::Money, Value::Int(x)) => {
                    let o = self.offsets[i].unwrap_or(0);
                    out[o..o + 8].copy_from_slice(&x.to_le_bytes());
                }
                (ColType::Date, Value::Date(d)) => {
                    let o = self.offsets[i].unwrap_or(0);
                    out[o..o + 4].copy_from_slice(&d.to_le_bytes());
                }
                (ColType::Char(n), Value::Str(s)) => {
                    if s.len() > n as usize {
                        return Err(Error::Schema(format!(
                            "'{s}' is longer than {} in column '{}'",
                            c.ty, c.name
                        )));
                    }
                    let o = self.offsets[i].unwrap_or(0);
                    out[o..o + s.len()].copy_from_slice(s.as_bytes());
                    out[o + s.len()..o + n as usize].fill(b' ');
                }
                (ColType::Varchar(_), Value::Str(_)) => {}
                _ => return Err(bad()),
            }
        }
        for (c, v) in self.columns.iter().zip(row) {
            if let (ColType::Varchar(n), Value::Str(s)) = (c.ty, v) {
                if s.len() > n as usize {
                    return Err(Error::Schema(format!(
                        "'{s}' is longer than {} in column '{}'",
                        c.ty, c.name
                    )));
                }
                out.extend_from_slice(&(s.len() as u16).to_le_bytes());
                out.extend_from_slice(s.as_bytes());
            }
        }
        Ok(out)
    }

    pub fn decode(&self, b: &[u8]) -> Result<Vec<Value>> {
        self.check_fixed(b)?;
        let mut var_at = self.fixed_bytes;
        let mut out = Vec::with_capacity(self.columns.len());
        for i in 0..self.columns.len() {
            let f = self.field(b, i, &mut var_at)?;
            out.push(Self::value(self.columns[i].ty, f)?);
        }
        Ok(out)
    }

    /// Whether `b` is a row of this schema, with exactly `decode`'s checks and errors, without
    /// building its values (the write paths check a row they only store).
    pub fn check(&self, b: &[u8]) -> Result<()> {
        self.check_fixed(b)?;
        let mut var_at = self.fixed_bytes;
        for i in 0..self.columns.len() {
            let ty = self.columns[i].ty;
            let f = self.field(b, i, &mut var_at)?;
            if matches!(ty, ColType::Char(_) | ColType::Varchar(_)) {
                Self::check_text(ty, f)?;
            }
        }
        Ok(())
    }

    /// Column `col` of row `b`, as `decode(b)?[col]` gives it, reading only what lies before
    /// it: an index key needs its one to three columns, not the row's strings. A row `decode`
    /// refuses may still give a column here; the write paths `check` every row they store.
    pub fn decode_column(&self, b: &[u8], col: usize) -> Result<Value> {
        let Some(c) = self.columns.get(col) else {
            return Err(Error::Schema(format!(
                "column {col} of a schema of {} columns",
                self.columns.len()
            )));
        };
        self.check_fixed(b)?;
        let mut var_at = self.fixed_bytes;
        if self.offsets[col].is_none() {
            // The VARCHARs before this one, to find where it starts.
            for i in (0..col).filter(|&i| self.offsets[i].is_none()) {
                self.field(b, i, &mut var_at)?;
            }
        }
        Self::value(c.ty, self.field(b, col, &mut var_at)?)
    }

    fn short(b: &[u8]) -> Error {
        Error::Schema(format!(
            "row of {} bytes is too short for its schema",
            b.len()
        ))
    }

    fn check_fixed(&self, b: &[u8]) -> Result<()> {
        if b.len() < self.fixed_bytes {
            return Err(Self::short(b));
        }
        Ok(())
    }

    /// Column `i`'s bytes in `b` (fixed part checked by `check_fixed`): a fixed column at its
    /// offset, a VARCHAR at `var_at`, which moves past it.
    fn field<'a>(&self, b: &'a [u8], i: usize, var_at: &mut usize) -> Result<&'a [u8]> {
        if let Some(o) = self.offsets[i] {
            let w = self.columns[i].ty.fixed_width().unwrap_or(0);
            return b.get(o..o + w).ok_or_else(|| Self::short(b));
        }
        let at = *var_at;
        if b.len() < at + 2 {
            return Err(Self::short(b));
        }
        let n = u16::from_le_bytes([b[at], b[at + 1]]) as usize;
        let s = b.get(at + 2..at + 2 + n).ok_or_else(|| Self::short(b))?;
        *var_at = at + 2 + n;
        Ok(s)
    }

    /// Checks a text column's bytes (validated once: `value` copies the `&str` it returns).
    fn check_text(ty: ColType, f: &[u8]) -> Result<&str> {
        std::str::from_utf8(f).map_err(|_| {
            Error::Schema(match ty {
                ColType::Char(_) => "CHAR is not UTF-8".into(),
                _ => "VARCHAR is not UTF-8".into(),
            })
        })
    }

    /// The value of a column of type `ty` whose bytes are `f` (from `field`).
    fn value(ty: ColType, f: &[u8]) -> Result<Value> {
        let word4 = || i32::from_le_bytes([f[0], f[1], f[2], f[3]]);
        let word8 = || {
            let mut w = [0u8; 8];
            w.copy_from_slice(&f[..8]);
            i64::from_le_bytes(w)
        };
        Ok(match ty {
            ColType::Int => Value::Int(i64::from(word4())),
            ColType::BigInt => Value::Int(word8()),
            ColType::Money => Value::Money(word8()),
            ColType::Date => Value::Date(word4()),
            ColType::Char(_) | ColType::Varchar(_) => {
                Value::Str(Self::check_text(ty, f)?.to_owned())
            }
        })
    }

    /// Reads an integer-like fixed column in place (invariant 2).
    pub fn get_i64(&self, row: &[u8], col: usize) -> Option<i64> {
        let o = self.fixed_offset(col)?;
        match self.columns[col].ty {
            ColType::Int | ColType::Date => Some(i64::from(i32::from_le_bytes(
                row.get(o..o + 4)?.try_into().ok()?,
            ))),
            ColType::BigInt | ColType::Money => {
                Some(i64::from_le_bytes(row.get(o..o + 8)?.try_into().ok()?))
            }
            _ => None,
        }
    }
    /// Writes an integer-like fixed column in place.
    pub fn set_i64(&self, row: &mut [u8], col: usize, v: i64) -> Result<()> {
        let o = self
            .fixed_offset(col)
            .ok_or_else(|| Error::Schema("not a fixed column".into()))?;
        match self.columns[col].ty {
            ColType::Int | ColType::Date => {
                let x = i32::try_from(v)
                    .map_err(|_| Error::Schema(format!("{v} does not fit in INT")))?;
                row[o..o + 4].copy_from_slice(&x.to_le_bytes());
            }
            ColType::BigInt | ColType::Money => row[o..o + 8].copy_from_slice(&v.to_le_bytes()),
            _ => return Err(Error::Schema("not an integer column".into())),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Schema {
        Schema::new(vec![
            Column {
                name: "id".into(),
                ty: ColType::Int,
            },
            Column {
                name: "name".into(),
                ty: ColType::Varchar(20),
            },
            Column {
                name: "bal".into(),
                ty: ColType::Money,
            },
            Column {
                name: "code".into(),
                ty: ColType::Char(4),
            },
            Column {
                name: "d".into(),
                ty: ColType::Date,
            },
        ])
        .unwrap()
    }

    #[test]
    fn rows_round_trip_and_fixed_columns_update_in_place() {
        let s = schema();
        let row = vec![
            Value::Int(-5),
            Value::Str("héllo".into()),
            Value::Money(123_45),
            Value::Str("ab  ".into()),
            Value::Date(days_from_civil(2024, 2, 29)),
        ];
        let mut b = s.encode(&row).unwrap();
        assert_eq!(s.decode(&b).unwrap(), row);
        s.set_i64(&mut b, 2, -999_999).unwrap();
        assert_eq!(s.get_i64(&b, 2), Some(-999_999));
        assert_eq!(days_from_civil(1970, 1, 1), 0);
    }

    #[test]
    fn check_and_one_column_agree_with_the_whole_decode() {
        let col = |name: &str, ty| Column {
            name: name.into(),
            ty,
        };
        // Two VARCHARs, so that a column after the first has to walk past it.
        let s = Schema::new(vec![
            col("a", ColType::Varchar(8)),
            col("id", ColType::BigInt),
            col("b", ColType::Varchar(8)),
            col("c", ColType::Char(3)),
        ])
        .unwrap();
        let row = vec![
            Value::Str("xyz".into()),
            Value::Int(-7),
            Value::Str("é".into()),
            Value::Str("ok ".into()),
        ];
        let b = s.encode(&row).unwrap();
        s.check(&b).unwrap();
        for (i, v) in row.iter().enumerate() {
            assert_eq!(&s.decode_column(&b, i).unwrap(), v, "column {i}");
        }
        assert!(s.decode_column(&b, 4).is_err());
        // Every truncation and every byte made invalid UTF-8: check refuses exactly what
        // decode refuses, with its message.
        let mut cases: Vec<Vec<u8>> = (0..b.len()).map(|n| b[..n].to_vec()).collect();
        for at in 0..b.len() {
            let mut c = b.clone();
            c[at] = 0xFF;
            cases.push(c);
        }
        for c in &cases {
            let want = s.decode(c).map(drop).map_err(|e| e.to_string());
            assert_eq!(s.check(c).map_err(|e| e.to_string()), want, "{c:?}");
        }
    }

    #[test]
    fn bad_values_are_errors_not_panics() {
        let s = schema();
        assert!(s.encode(&[Value::Int(1)]).is_err());
        assert!(s
            .encode(&[
                Value::Int(1 << 40),
                Value::Str("".into()),
                Value::Money(0),
                Value::Str("".into()),
                Value::Date(0)
            ])
            .is_err());
        assert!(s
            .encode(&[
                Value::Int(1),
                Value::Str("x".repeat(21)),
                Value::Money(0),
                Value::Str("".into()),
                Value::Date(0)
            ])
            .is_err());
        assert!(s.decode(&[1, 2, 3]).is_err());
        assert!(Schema::new(vec![
            Column {
                name: "a".into(),
                ty: ColType::Int
            },
            Column {
                name: "A".into(),
                ty: ColType::Int
            }
        ])
        .is_err());
    }
}
