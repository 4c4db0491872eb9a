//! Order-preserving key encoding: `memcmp` order of encoded keys equals the order of the values,
//! column by column, so composite keys are a plain concatenation.
//!
//! | type | encoding |
//! |---|---|
//! | INT, DATE | 4 bytes big-endian with the sign bit flipped |
//! | BIGINT, MONEY | 8 bytes big-endian with the sign bit flipped |
//! | CHAR, VARCHAR | bytes (CHAR: trailing spaces dropped) with 0x00 escaped as 0x00 0xFF, then 0x00 0x00 |
//!
//! Invariants:
//! 1. For values a, b of one type: a < b iff enc(a) < enc(b) bytewise, and no encoding is a
//!    prefix of another (so concatenations compare column by column).

use crate::error::{Error, Result};
use crate::tuple::{ColType, Value};

pub fn encode_into(out: &mut Vec<u8>, ty: ColType, v: &Value) -> Result<()> {
    match (ty, v) {
        (ColType::Int, Value::Int(x)) => {
            let x =
                i32::try_from(*x).map_err(|_| Error::Schema(format!("{x} does not fit in INT")))?;
            out.extend_from_slice(&((x as u32) ^ 0x8000_0000).to_be_bytes());
        }
        (ColType::Date, Value::Date(x)) => {
            out.extend_from_slice(&((*x as u32) ^ 0x8000_0000).to_be_bytes())
        }
        (ColType::BigInt | ColType::Money, Value::Int(x) | Value::Money(x)) => {
            out.extend_from_slice(&((*x as u64) ^ 0x8000_0000_0000_0000).to_be_bytes())
        }
        (ColType::Char(_), Value::Str(s)) => escape(out, s.trim_end_matches(' ').as_bytes()),
        (ColType::Varchar(_), Value::Str(s)) => escape(out, s.as_bytes()),
        (ty, v) => {
            return Err(Error::Schema(format!(
                "key column of type {ty} cannot hold {v:?}"
            )))
        }
    }
    Ok(())
}

fn escape(out: &mut Vec<u8>, b: &[u8]) {
    for &c in b {
        out.push(c);
        if c == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

/// Encodes a composite key from `(type, value)` pairs.
pub fn encode(parts: &[(ColType, &Value)]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(16);
    for (ty, v) in parts {
        encode_into(&mut out, *ty, v)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn order_is_preserved(a in any::<i64>(), b in any::<i64>(), s in "[a-c\\x00]{0,4}", t in "[a-c\\x00]{0,4}") {
            let ka = encode(&[(ColType::BigInt, &Value::Int(a)), (ColType::Varchar(8), &Value::Str(s.clone()))]).unwrap();
            let kb = encode(&[(ColType::BigInt, &Value::Int(b)), (ColType::Varchar(8), &Value::Str(t.clone()))]).unwrap();
            prop_assert_eq!(ka.cmp(&kb), (a, s.as_bytes()).cmp(&(b, t.as_bytes())));
        }
    }
}
