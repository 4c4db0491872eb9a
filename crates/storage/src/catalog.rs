//! The persistent catalog: tablespaces, tables and indexes, kept as records of the catalog heap
//! (its head is DB page 1), so catalog changes are logged and recovered like any data.
//!
//! Catalog record: `kind u8 | id u32 | name (u16 len + bytes) | body`:
//!
//! | kind | body |
//! |---|---|
//! | 1 tablespace | option count u16, then (key, value) strings |
//! | 2 table | tablespace id u32, heap head page u32, column count u16, then (name, type code u8, length u16) |
//! | 3 index | table id u32, root page u32, unique u8, column count u16, then column numbers u16 |
//! | 4 region | option count u16, then (key, value) strings (region.rs; the dies are in the store's region table) |
//!
//! Invariants: 1. names are unique per kind (case-insensitive); 2. ids are never reused; 3. the
//! in-memory catalog equals the catalog heap after every committed DDL and after recovery.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::tuple::{ColType, Column, Schema};
use crate::{ObjectId, PageId, Rid};

pub const CATALOG_HEAD: PageId = 1;
pub const CATALOG_OBJECT: ObjectId = 1;
/// The default tablespace, always present.
pub const DEFAULT_TABLESPACE: ObjectId = 2;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tablespace {
    pub id: ObjectId,
    pub name: String,
    pub options: Vec<(String, String)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    pub id: ObjectId,
    pub name: String,
    pub tablespace: ObjectId,
    pub head: PageId,
    pub schema: Schema,
    pub indexes: Vec<ObjectId>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Index {
    pub id: ObjectId,
    pub name: String,
    pub table: ObjectId,
    pub root: PageId,
    pub unique: bool,
    pub columns: Vec<usize>,
}

/// A NoFTL region (region.rs): its name and options as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Region {
    pub id: ObjectId,
    pub name: String,
    pub options: Vec<(String, String)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    Region(Region),
    Tablespace(Tablespace),
    Table(Table),
    Index(Index),
}

fn put_str(b: &mut Vec<u8>, s: &str) {
    b.extend_from_slice(&(s.len() as u16).to_le_bytes());
    b.extend_from_slice(s.as_bytes());
}

struct Rd<'a>(&'a [u8], usize);
impl Rd<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        let s = self
            .0
            .get(self.1..self.1 + n)
            .ok_or_else(|| Error::Recovery("truncated catalog record".into()))?;
        self.1 += n;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn str(&mut self) -> Result<String> {
        let n = self.u16()? as usize;
        String::from_utf8(self.take(n)?.to_vec())
            .map_err(|_| Error::Recovery("catalog name is not UTF-8".into()))
    }
}

impl Entry {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(64);
        let (kind, id, name, options) = match self {
            Entry::Region(r) => (4, r.id, &r.name, &r.options),
            Entry::Tablespace(t) => (1, t.id, &t.name, &t.options),
            _ => (0, 0, &String::new(), &Vec::new()),
        };
        match self {
            Entry::Region(_) | Entry::Tablespace(_) => {
                b.push(kind);
                b.extend_from_slice(&id.to_le_bytes());
                put_str(&mut b, name);
                b.extend_from_slice(&(options.len() as u16).to_le_bytes());
                for (k, v) in options {
                    put_str(&mut b, k);
                    put_str(&mut b, v);
                }
            }
            Entry::Table(t) => {
                b.push(2);
                b.extend_from_slice(&t.id.to_le_bytes());
                put_str(&mut b, &t.name);
                b.extend_from_slice(&t.tablespace.to_le_bytes());
                b.extend_from_slice(&t.head.to_le_bytes());
                b.extend_from_slice(&(t.schema.columns.len() as u16).to_le_bytes());
                for c in &t.schema.columns {
                    put_str(&mut b, &c.name);
                    let (code, n) = c.ty.code();
                    b.push(code);
                    b.extend_from_slice(&n.to_le_bytes());
                }
            }
            Entry::Index(i) => {
                b.push(3);
                b.extend_from_slice(&i.id.to_le_bytes());
                put_str(&mut b, &i.name);
                b.extend_from_slice(&i.table.to_le_bytes());
                b.extend_from_slice(&i.root.to_le_bytes());
                b.push(u8::from(i.unique));
                b.extend_from_slice(&(i.columns.len() as u16).to_le_bytes());
                for c in &i.columns {
                    b.extend_from_slice(&(*c as u16).to_le_bytes());
                }
            }
        }
        b
    }
    pub fn decode(b: &[u8]) -> Result<Entry> {
        let mut r = Rd(b, 0);
        let kind = r.u8()?;
        let id = r.u32()?;
        let name = r.str()?;
        Ok(match kind {
            1 | 4 => {
                let n = r.u16()?;
                let mut options = Vec::new();
                for _ in 0..n {
                    options.push((r.str()?, r.str()?));
                }
                if kind == 1 {
                    Entry::Tablespace(Tablespace { id, name, options })
                } else {
                    Entry::Region(Region { id, name, options })
                }
            }
            2 => {
                let tablespace = r.u32()?;
                let head = r.u32()?;
                let n = r.u16()?;
                let mut cols = Vec::new();
                for _ in 0..n {
                    let cname = r.str()?;
                    let code = r.u8()?;
                    let len = r.u16()?;
                    let ty = ColType::from_code(code, len)
                        .ok_or_else(|| Error::Recovery(format!("bad column type code {code}")))?;
                    cols.push(Column { name: cname, ty });
                }
                Entry::Table(Table {
                    id,
                    name,
                    tablespace,
                    head,
                    schema: Schema::new(cols)?,
                    indexes: vec![],
                })
            }
            3 => {
                let table = r.u32()?;
                let root = r.u32()?;
                let unique = r.u8()? != 0;
                let n = r.u16()?;
                let mut columns = Vec::new();
                for _ in 0..n {
                    columns.push(r.u16()? as usize);
                }
                Entry::Index(Index {
                    id,
                    name,
                    table,
                    root,
                    unique,
                    columns,
                })
            }
            k => return Err(Error::Recovery(format!("unknown catalog record kind {k}"))),
        })
    }
}

/// The catalog in memory.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    pub regions: BTreeMap<ObjectId, Region>,
    pub tablespaces: BTreeMap<ObjectId, Tablespace>,
    /// Shared, so that a row operation holds its table and indexes across `&mut Engine` calls
    /// for a reference count instead of a copy of their names and schemas.
    pub tables: BTreeMap<ObjectId, Arc<Table>>,
    pub indexes: BTreeMap<ObjectId, Arc<Index>>,
    pub rids: BTreeMap<ObjectId, Rid>,
    pub next_id: ObjectId,
}

impl Catalog {
    pub fn add(&mut self, e: Entry, rid: Rid) {
        let id = match &e {
            Entry::Region(r) => r.id,
            Entry::Tablespace(t) => t.id,
            Entry::Table(t) => t.id,
            Entry::Index(i) => i.id,
        };
        self.next_id = self.next_id.max(id + 1);
        self.rids.insert(id, rid);
        match e {
            Entry::Region(r) => {
                self.regions.insert(r.id, r);
            }
            Entry::Tablespace(t) => {
                self.tablespaces.insert(t.id, t);
            }
            Entry::Table(mut t) => {
                t.indexes = self
                    .indexes
                    .values()
                    .filter(|i| i.table == t.id)
                    .map(|i| i.id)
                    .collect();
                self.tables.insert(t.id, Arc::new(t));
            }
            Entry::Index(i) => {
                if let Some(t) = self.tables.get_mut(&i.table) {
                    if !t.indexes.contains(&i.id) {
                        Arc::make_mut(t).indexes.push(i.id);
                    }
                }
                self.indexes.insert(i.id, Arc::new(i));
            }
        }
    }
    pub fn region_by_name(&self, name: &str) -> Option<&Region> {
        self.regions
            .values()
            .find(|r| r.name.eq_ignore_ascii_case(name))
    }
    /// The region a tablespace names, if any.
    pub fn region_of_tablespace(&self, ts: ObjectId) -> Option<&str> {
        self.tablespaces
            .get(&ts)?
            .options
            .iter()
            .find(|(k, _)| k == "REGION")
            .map(|(_, v)| v.as_str())
    }
    pub fn tablespace_by_name(&self, name: &str) -> Option<&Tablespace> {
        self.tablespaces
            .values()
            .find(|t| t.name.eq_ignore_ascii_case(name))
    }
    pub fn table_by_name(&self, name: &str) -> Option<&Table> {
        self.tables
            .values()
            .find(|t| t.name.eq_ignore_ascii_case(name))
            .map(|t| &**t)
    }
    pub fn index_by_name(&self, name: &str) -> Option<&Index> {
        self.indexes
            .values()
            .find(|t| t.name.eq_ignore_ascii_case(name))
            .map(|i| &**i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip() {
        let s = Schema::new(vec![
            Column {
                name: "a".into(),
                ty: ColType::Varchar(9),
            },
            Column {
                name: "b".into(),
                ty: ColType::Money,
            },
        ])
        .unwrap();
        for e in [
            Entry::Tablespace(Tablespace {
                id: 3,
                name: "ts".into(),
                options: vec![("REGION".into(), "rg".into())],
            }),
            Entry::Region(Region {
                id: 6,
                name: "rg".into(),
                options: vec![("MAX_CHIPS".into(), "2".into())],
            }),
            Entry::Table(Table {
                id: 4,
                name: "t".into(),
                tablespace: 3,
                head: 9,
                schema: s,
                indexes: vec![],
            }),
            Entry::Index(Index {
                id: 5,
                name: "i".into(),
                table: 4,
                root: 10,
                unique: true,
                columns: vec![1, 0],
            }),
        ] {
            assert_eq!(Entry::decode(&e.encode()).unwrap(), e);
        }
        assert!(Entry::decode(&[9, 0, 0]).is_err());
    }
}
