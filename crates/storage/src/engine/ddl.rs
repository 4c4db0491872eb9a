//! The catalog and DDL: statements parsed by ddl.rs run as logged catalog inserts (catalog.rs),
//! creating tablespaces, regions, tables and indexes.

use crate::btree::BTree;
use crate::catalog::{self, Entry, Index, Table, Tablespace};
use crate::ddl::{self, Statement};
use crate::error::{Error, Result};
use crate::heap::Heap;
use crate::lock::{LockMode, Resource};
use crate::tuple::Schema;
use crate::TxnId;

use super::Engine;

impl Engine {
    pub(super) fn catalog_insert(&mut self, txn: TxnId, e: Entry) -> Result<()> {
        self.lock(txn, Resource::Table(catalog::CATALOG_OBJECT), LockMode::X)?;
        let rid = self.heap_insert(
            txn,
            catalog::CATALOG_OBJECT,
            catalog::CATALOG_HEAD,
            &e.encode(),
        )?;
        self.catalog.add(e, rid);
        Ok(())
    }

    /// Runs a DDL script inside `txn`. Nothing is created unless every statement is valid.
    pub fn execute_ddl(&mut self, txn: TxnId, src: &str) -> Result<()> {
        self.active(txn)?;
        let stmts = ddl::parse(src)?;
        for s in stmts {
            self.execute_statement(txn, s)?;
        }
        Ok(())
    }

    fn execute_statement(&mut self, txn: TxnId, s: Statement) -> Result<()> {
        match s {
            Statement::CreateRegion { name, options } => {
                if self.catalog.region_by_name(&name).is_some() {
                    return Err(Error::AlreadyExists {
                        kind: "region",
                        name,
                    });
                }
                crate::region::RegionSpec::parse(&name, &options)?;
                // The store checks that the region fits before it writes anything.
                self.now = self.io(|s, t| s.create_region(t, &name, &options))?;
                let id = self.catalog.next_id;
                self.catalog_insert(txn, Entry::Region(catalog::Region { id, name, options }))
            }
            Statement::CreateTablespace { name, options } => {
                if self.catalog.tablespace_by_name(&name).is_some() {
                    return Err(Error::AlreadyExists {
                        kind: "tablespace",
                        name,
                    });
                }
                for (k, v) in &options {
                    if !["REGION", "EXTENT_SIZE", "IPA_MODE", "IAA", "U2DI", "REUSE"]
                        .contains(&k.as_str())
                    {
                        return Err(Error::Unsupported(format!(
                            "tablespace option {k} (known: REGION, EXTENT_SIZE, IPA_MODE, IAA, U2DI, REUSE)"
                        )));
                    }
                    crate::iaa::check_option(k, v).map_err(Error::Config)?;
                }
                if let Some((_, r)) = options.iter().find(|(k, _)| k == "REGION") {
                    if self.catalog.region_by_name(r).is_none() {
                        return Err(Error::NotFound {
                            kind: "region",
                            name: r.clone(),
                        });
                    }
                }
                let id = self.catalog.next_id;
                self.catalog_insert(txn, Entry::Tablespace(Tablespace { id, name, options }))
            }
            Statement::CreateTable {
                name,
                columns,
                tablespace,
            } => {
                if self.catalog.table_by_name(&name).is_some() {
                    return Err(Error::AlreadyExists {
                        kind: "table",
                        name,
                    });
                }
                let ts = match tablespace {
                    Some(t) => {
                        self.catalog
                            .tablespace_by_name(&t)
                            .ok_or_else(|| Error::NotFound {
                                kind: "tablespace",
                                name: t,
                            })?
                            .id
                    }
                    None => catalog::DEFAULT_TABLESPACE,
                };
                let schema = Schema::new(columns)?;
                let id = self.catalog.next_id;
                self.catalog.next_id += 1;
                self.bind_region(id, ts)?;
                let head = self.heap_create(id)?;
                self.catalog_insert(
                    txn,
                    Entry::Table(Table {
                        id,
                        name,
                        tablespace: ts,
                        head,
                        schema,
                        indexes: vec![],
                    }),
                )
            }
            Statement::CreateIndex {
                name,
                table,
                columns,
                unique,
                tablespace,
            } => {
                if self.catalog.index_by_name(&name).is_some() {
                    return Err(Error::AlreadyExists {
                        kind: "index",
                        name,
                    });
                }
                if let Some(t) = &tablespace {
                    self.catalog
                        .tablespace_by_name(t)
                        .ok_or_else(|| Error::NotFound {
                            kind: "tablespace",
                            name: t.clone(),
                        })?;
                }
                let t = self
                    .catalog
                    .table_by_name(&table)
                    .ok_or_else(|| Error::NotFound {
                        kind: "table",
                        name: table.clone(),
                    })?
                    .clone();
                let mut cols = Vec::new();
                for c in &columns {
                    cols.push(t.schema.col(c).ok_or_else(|| Error::NotFound {
                        kind: "column",
                        name: format!("{table}.{c}"),
                    })?);
                }
                let id = self.catalog.next_id;
                self.catalog.next_id += 1;
                // The index record keeps no tablespace, so the index lives (and after a restart
                // is placed again) with its table.
                self.bind_region(id, t.tablespace)?;
                let root = self.bt_create(id)?;
                let idx = Index {
                    id,
                    name,
                    table: t.id,
                    root,
                    unique,
                    columns: cols,
                };
                // Index the rows already there.
                self.lock(txn, Resource::Table(t.id), LockMode::S)?;
                for (rid, row) in self.heap_scan(t.head)? {
                    let key = self.index_key(&idx, &t.schema, &row, rid)?;
                    self.bt_insert(txn, root, &key, &rid.encode(), &idx.name)?;
                }
                self.catalog_insert(txn, Entry::Index(idx))
            }
        }
    }
}
