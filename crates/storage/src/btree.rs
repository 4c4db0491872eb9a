//! B+-trees on slotted pages. The node format (entries, search in a node, the redo ops on one
//! node, the check of a node read from storage) is in [`crate::btree_node`], one floor below the
//! buffer pool that checks nodes it reads; its public items are re-exported here.
//!
//! Entry: `key length u16 | key | value`. Leaves hold `key -> value` (a record id), sorted by
//! key, and are linked both ways (`page::next`/`prev`) for range scans in both directions. Inner
//! nodes hold `separator -> child`; their `aux` field is the leftmost child, and a key `k` goes to
//! the child of the last separator `<= k`. The root page never moves (its id is in the catalog):
//! a root split moves its contents into two new children.
//!
//! Logging: key inserts and deletes are undoable updates (physiological redo on one leaf;
//! logical undo through the tree, since the key may have moved). Splits and merges are
//! structure modifications logged as one redo-only record each (page images plus small
//! physiological ops), never undone: they do not change the tree's contents.
//!
//! Invariants:
//! 1. Keys in a node are strictly increasing; all keys under the child right of separator `s`
//!    are `>= s`, and under the child left of it `< s`.
//! 2. All leaves are at level 0 and the path from the root to any leaf has the same length.
//! 3. The leaf chain visits every key once, in order; `prev` mirrors `next`.
//! 4. Splits are top-down and preemptive: a descent for an insert splits every node that could
//!    not take one more entry, so a split never has to split its parent.
//! 5. A merge joins two siblings under one parent only when the result fits in a page with
//!    room to spare; the root collapses when it is an inner node with a single child.

use std::ops::Bound;

use crate::access::{Event, PageAccess};
use crate::buffer::Fix;
use crate::error::{Error, Result};
use crate::log::{Body, Op, Undo};
use crate::page::{self, PageType};
use crate::pagestore::PageKind;
use crate::slotted;
use crate::{ObjectId, PageId, TxnId};

pub use crate::btree_node::{
    apply_delete, apply_insert, check_node, entry, entry_key, entry_val, max_key_bytes, search,
};
use crate::btree_node::{
    build, child_at, child_pos, child_val, entries, key_at, used_bytes, val_at, MAX_VAL,
};

/// The B+-tree algorithms, written against [`PageAccess`] (the engine implements both): a
/// tree's pages are fixed, changed through logged ops and allocated only through it. The
/// methods without a doc of their own are steps of the documented ones.
pub(crate) trait BTree: PageAccess {
    /// Creates an empty tree (one leaf, the root) for index `object`.
    fn bt_create(&mut self, object: ObjectId) -> Result<PageId> {
        let (pid, alloc) = self.alloc_page(object, PageKind::BTreeLeaf, &[])?;
        let img = build(
            (self.page_bytes(), self.ipa_scheme(object)),
            pid,
            true,
            0,
            object,
            &[],
            0,
            0,
            0,
        );
        self.log_apply(0, Body::Redo(vec![alloc, Op::image(pid, &img)]))?;
        Ok(pid)
    }

    fn check_key(&self, key: &[u8], val: &[u8]) -> Result<()> {
        let max = max_key_bytes(self.page_bytes());
        if key.len() > max || val.len() > MAX_VAL {
            return Err(Error::RecordTooLarge {
                bytes: key.len(),
                max,
            });
        }
        Ok(())
    }

    /// Path from the root to the leaf covering `key` (`None`: leftmost / rightmost leaf).
    fn bt_path(
        &mut self,
        root: PageId,
        key: Option<&[u8]>,
        rightmost: bool,
    ) -> Result<Vec<(PageId, usize)>> {
        let mut path = Vec::with_capacity(4);
        let mut pid = root;
        loop {
            let f = self.fix(pid, Fix::Read)?;
            let p = self.pool().page(f);
            if page::page_type(p) == PageType::BTreeLeaf {
                self.pool_mut().unfix(f);
                path.push((pid, 0));
                return Ok(path);
            }
            if page::page_type(p) != PageType::BTreeInner || path.len() > 64 {
                self.pool_mut().unfix(f);
                return Err(Error::Corrupt {
                    pid,
                    why: "not a B-tree page on a B-tree path".into(),
                });
            }
            let pos = match key {
                Some(k) => child_pos(p, k),
                None if rightmost => slotted::nslots(p),
                None => 0,
            };
            let child = child_at(p, pos);
            self.pool_mut().unfix(f);
            path.push((pid, pos));
            pid = child;
        }
    }

    /// Exact lookup.
    fn bt_get(&mut self, root: PageId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.bt_get_with(root, key, <[u8]>::to_vec)
    }

    /// Exact lookup that hands the value to `f` in the page, without copying it out (a point
    /// lookup per row would otherwise allocate a path and a value).
    fn bt_get_with<T>(
        &mut self,
        root: PageId,
        key: &[u8],
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>> {
        let leaf = self.bt_leaf(root, key)?;
        let fr = self.fix(leaf, Fix::Read)?;
        let p = self.pool().page(fr);
        let r = search(p, key).ok().map(|i| f(val_at(p, i)));
        self.pool_mut().unfix(fr);
        Ok(r)
    }

    /// The leaf on `key`'s path: `bt_path(root, Some(key), false)`'s last page, with the same
    /// fixes and checks, without building the path.
    fn bt_leaf(&mut self, root: PageId, key: &[u8]) -> Result<PageId> {
        let mut depth = 0usize;
        let mut pid = root;
        loop {
            let f = self.fix(pid, Fix::Read)?;
            let p = self.pool().page(f);
            if page::page_type(p) == PageType::BTreeLeaf {
                self.pool_mut().unfix(f);
                return Ok(pid);
            }
            if page::page_type(p) != PageType::BTreeInner || depth > 64 {
                self.pool_mut().unfix(f);
                return Err(Error::Corrupt {
                    pid,
                    why: "not a B-tree page on a B-tree path".into(),
                });
            }
            let child = child_at(p, child_pos(p, key));
            self.pool_mut().unfix(f);
            depth += 1;
            pid = child;
        }
    }

    /// Descends for an insert of an entry of `need` bytes, splitting full nodes on the way
    /// (invariant 4); returns the leaf that can take it.
    fn bt_prepare_insert(&mut self, root: PageId, key: &[u8], need: usize) -> Result<PageId> {
        let inner_need = max_key_bytes(self.page_bytes()) + 2 + 4 + 4;
        'restart: for _ in 0..64 {
            let mut parent: Option<PageId> = None;
            let mut pid = root;
            loop {
                let f = self.fix(pid, Fix::Read)?;
                let p = self.pool().page(f);
                let leaf = page::page_type(p) == PageType::BTreeLeaf;
                let room = slotted::fits(p, if leaf { need } else { inner_need }, true);
                let child = if leaf {
                    0
                } else {
                    child_at(p, child_pos(p, key))
                };
                self.pool_mut().unfix(f);
                if !room {
                    self.bt_split(root, pid, parent)?;
                    continue 'restart;
                }
                if leaf {
                    return Ok(pid);
                }
                parent = Some(pid);
                pid = child;
            }
        }
        Err(Error::Corrupt {
            pid: root,
            why: "B-tree insert kept splitting".into(),
        })
    }

    /// Splits `pid` (whose parent has room, or which is the root).
    fn bt_split(&mut self, root: PageId, pid: PageId, parent: Option<PageId>) -> Result<()> {
        let pb = self.page_bytes();
        let f = self.fix(pid, Fix::Read)?;
        let p = self.pool().page(f);
        let leaf = page::page_type(p) == PageType::BTreeLeaf;
        let level = slotted::level(p);
        let object = page::object(p);
        let aux = slotted::aux(p);
        let (prev, next) = (page::prev(p), page::next(p));
        let es = entries(p);
        self.pool_mut().unfix(f);
        if es.len() < 2 {
            return Err(Error::Corrupt {
                pid,
                why: "a full B-tree node with fewer than two entries".into(),
            });
        }
        // Split point: half the bytes.
        let total: usize = es.iter().map(|e| e.len() + 4).sum();
        let mut acc = 0;
        let mut m = 0;
        while m < es.len() - 1 && acc + es[m].len() + 4 <= total / 2 {
            acc += es[m].len() + 4;
            m += 1;
        }
        let m = m.clamp(1, es.len() - 1);
        let (left, right_all) = es.split_at(m);
        let (sep, right_aux, right): (Vec<u8>, PageId, &[Vec<u8>]) = if leaf {
            (entry_key(&right_all[0]).to_vec(), 0, right_all)
        } else {
            (
                entry_key(&right_all[0]).to_vec(),
                child_val(entry_val(&right_all[0])),
                &right_all[1..],
            )
        };
        let kind = if leaf {
            PageKind::BTreeLeaf
        } else {
            PageKind::BTreeInner
        };
        let mut ops = Vec::with_capacity(6);
        match parent {
            None => {
                debug_assert_eq!(pid, root);
                let (l, al) = self.alloc_page(object, kind, &[])?;
                let (r, ar) = self.alloc_page(object, kind, &[l])?;
                let (lp, ln, rp, rn) = if leaf { (0, r, l, 0) } else { (0, 0, 0, 0) };
                let limg = build(
                    (pb, self.ipa_scheme(object)),
                    l,
                    leaf,
                    level,
                    object,
                    left,
                    aux,
                    lp,
                    ln,
                );
                let rimg = build(
                    (pb, self.ipa_scheme(object)),
                    r,
                    leaf,
                    level,
                    object,
                    right,
                    right_aux,
                    rp,
                    rn,
                );
                let mut rbytes = r.to_le_bytes().to_vec();
                rbytes.truncate(4);
                let root_img = build(
                    (pb, self.ipa_scheme(object)),
                    root,
                    false,
                    level + 1,
                    object,
                    &[entry(&sep, &rbytes)],
                    l,
                    0,
                    0,
                );
                ops.extend([
                    al,
                    ar,
                    Op::image(l, &limg),
                    Op::image(r, &rimg),
                    Op::image(root, &root_img),
                ]);
            }
            Some(par) => {
                let (r, ar) = self.alloc_page(object, kind, &[])?;
                let (ln, rp, rn) = if leaf { (r, pid, next) } else { (0, 0, 0) };
                let limg = build(
                    (pb, self.ipa_scheme(object)),
                    pid,
                    leaf,
                    level,
                    object,
                    left,
                    aux,
                    if leaf { prev } else { 0 },
                    ln,
                );
                let rimg = build(
                    (pb, self.ipa_scheme(object)),
                    r,
                    leaf,
                    level,
                    object,
                    right,
                    right_aux,
                    rp,
                    rn,
                );
                ops.extend([
                    ar,
                    Op::image(pid, &limg),
                    Op::image(r, &rimg),
                    Op::BtInsert {
                        pid: par,
                        key: sep,
                        val: r.to_le_bytes().to_vec(),
                    },
                ]);
                if leaf && next != 0 {
                    ops.push(Op::SetField {
                        pid: next,
                        offset: 28,
                        value: r,
                    });
                }
            }
        }
        self.count(Event::BTreeSplit);
        self.log_apply(0, Body::Redo(ops))?;
        Ok(())
    }

    /// Inserts `key -> val` (logged, undoable). Fails with `DuplicateKey` if the key exists.
    fn bt_insert(
        &mut self,
        txn: TxnId,
        root: PageId,
        key: &[u8],
        val: &[u8],
        name: &str,
    ) -> Result<()> {
        self.check_key(key, val)?;
        let need = 2 + key.len() + val.len() + 4;
        let leaf = self.bt_prepare_insert(root, key, need)?;
        let f = self.fix(leaf, Fix::Read)?;
        let dup = search(self.pool().page(f), key).is_ok();
        self.pool_mut().unfix(f);
        if dup {
            return Err(Error::DuplicateKey {
                index: name.to_string(),
            });
        }
        self.log_apply(
            txn,
            Body::Update {
                op: Op::BtInsert {
                    pid: leaf,
                    key: key.to_vec(),
                    val: val.to_vec(),
                },
                undo: Undo::IndexRemove {
                    root,
                    key: key.to_vec(),
                },
            },
        )?;
        Ok(())
    }

    /// Deletes `key` (logged, undoable); returns its value, or None if absent. Merges after.
    fn bt_delete(&mut self, txn: TxnId, root: PageId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let path = self.bt_path(root, Some(key), false)?;
        let leaf = path.last().map(|x| x.0).unwrap_or(root);
        let f = self.fix(leaf, Fix::Read)?;
        let val = search(self.pool().page(f), key)
            .ok()
            .map(|i| val_at(self.pool().page(f), i).to_vec());
        self.pool_mut().unfix(f);
        let Some(val) = val else { return Ok(None) };
        self.log_apply(
            txn,
            Body::Update {
                op: Op::BtDelete {
                    pid: leaf,
                    key: key.to_vec(),
                },
                undo: Undo::IndexPut {
                    root,
                    key: key.to_vec(),
                    val: val.clone(),
                },
            },
        )?;
        self.bt_rebalance(root, &path)?;
        Ok(Some(val))
    }

    /// The leaf holding `key` now (for logical undo).
    fn bt_leaf_of(&mut self, root: PageId, key: &[u8]) -> Result<PageId> {
        Ok(self
            .bt_path(root, Some(key), false)?
            .last()
            .map(|x| x.0)
            .unwrap_or(root))
    }

    /// Merges underfull nodes on `path` bottom-up (invariant 5).
    fn bt_rebalance(&mut self, root: PageId, path: &[(PageId, usize)]) -> Result<()> {
        let pb = self.page_bytes();
        for k in (1..path.len()).rev() {
            let (node, _) = path[k];
            let (par, pos) = path[k - 1];
            let f = self.fix(node, Fix::Read)?;
            let under = used_bytes(self.pool().page(f)) < pb / 4;
            self.pool_mut().unfix(f);
            if !under {
                return Ok(());
            }
            let f = self.fix(par, Fix::Read)?;
            let pp = self.pool().page(f);
            let nchildren = slotted::nslots(pp) + 1;
            let (lpos, rpos) = if pos + 1 < nchildren {
                (pos, pos + 1)
            } else if pos > 0 {
                (pos - 1, pos)
            } else {
                (pos, pos)
            };
            let (l, r) = (child_at(pp, lpos), child_at(pp, rpos));
            let sep = if rpos > 0 {
                key_at(pp, rpos - 1).to_vec()
            } else {
                vec![]
            };
            self.pool_mut().unfix(f);
            if lpos == rpos {
                return Ok(());
            }
            let fl = self.fix(l, Fix::Read)?;
            let fr = self.fix(r, Fix::Read)?;
            let (lp, rp) = (self.pool().page(fl), self.pool().page(fr));
            let leaf = page::page_type(lp) == PageType::BTreeLeaf;
            let mut es = entries(lp);
            if !leaf {
                es.push(entry(&sep, &slotted::aux(rp).to_le_bytes()));
            }
            es.extend(entries(rp));
            let bytes: usize = es.iter().map(|e| e.len() + 4).sum();
            let (level, object, laux, lprev, rnext) = (
                slotted::level(lp),
                page::object(lp),
                slotted::aux(lp),
                page::prev(lp),
                page::next(rp),
            );
            self.pool_mut().unfix(fl);
            self.pool_mut().unfix(fr);
            if bytes > (slotted::end(&vec![0u8; pb]) - slotted::SLOTS_AT) * 3 / 4 {
                return Ok(());
            }
            let img = if leaf {
                build(
                    (pb, self.ipa_scheme(object)),
                    l,
                    true,
                    level,
                    object,
                    &es,
                    0,
                    lprev,
                    rnext,
                )
            } else {
                build(
                    (pb, self.ipa_scheme(object)),
                    l,
                    false,
                    level,
                    object,
                    &es,
                    laux,
                    0,
                    0,
                )
            };
            let mut ops = vec![
                Op::image(l, &img),
                Op::BtDelete { pid: par, key: sep },
                self.free_op(r)?,
            ];
            if leaf && rnext != 0 {
                ops.push(Op::SetField {
                    pid: rnext,
                    offset: 28,
                    value: l,
                });
            }
            self.count(Event::BTreeMerge);
            self.log_apply(0, Body::Redo(ops))?;
        }
        // Root collapse: an inner root with one child takes the child's contents.
        let f = self.fix(root, Fix::Read)?;
        let p = self.pool().page(f);
        let collapse = page::page_type(p) == PageType::BTreeInner && slotted::nslots(p) == 0;
        let child = slotted::aux(p);
        self.pool_mut().unfix(f);
        if collapse {
            let f = self.fix(child, Fix::Read)?;
            let mut img = self.pool().page(f).to_vec();
            self.pool_mut().unfix(f);
            crate::page::put_u32(&mut img, 4, root);
            page::set_prev(&mut img, 0);
            page::set_next(&mut img, 0);
            let ops = vec![Op::image(root, &img), self.free_op(child)?];
            self.log_apply(0, Body::Redo(ops))?;
        }
        Ok(())
    }

    /// Entries with keys in the bounds, ascending or descending, at most `limit`.
    fn bt_scan(
        &mut self,
        root: PageId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let in_lo = |k: &[u8]| match lo {
            Bound::Included(b) => k >= b,
            Bound::Excluded(b) => k > b,
            Bound::Unbounded => true,
        };
        let in_hi = |k: &[u8]| match hi {
            Bound::Included(b) => k <= b,
            Bound::Excluded(b) => k < b,
            Bound::Unbounded => true,
        };
        let mut out = Vec::new();
        let start_key: Option<Vec<u8>> = match if reverse { hi } else { lo } {
            Bound::Included(b) | Bound::Excluded(b) => Some(b.to_vec()),
            Bound::Unbounded => None,
        };
        let mut pid = self
            .bt_path(root, start_key.as_deref(), reverse)?
            .last()
            .map(|x| x.0)
            .unwrap_or(root);
        let mut guard = 0u64;
        while pid != 0 && out.len() < limit {
            guard += 1;
            if guard > self.db_pages() {
                return Err(Error::Corrupt {
                    pid,
                    why: "leaf chain has a cycle".into(),
                });
            }
            let f = self.fix(pid, Fix::Read)?;
            let p = self.pool().page(f);
            let n = slotted::nslots(p);
            let mut done = false;
            let idx: Box<dyn Iterator<Item = usize>> = if reverse {
                Box::new((0..n).rev())
            } else {
                Box::new(0..n)
            };
            for i in idx {
                let k = key_at(p, i);
                if reverse {
                    if !in_hi(k) {
                        continue;
                    }
                    if !in_lo(k) {
                        done = true;
                        break;
                    }
                } else {
                    if !in_lo(k) {
                        continue;
                    }
                    if !in_hi(k) {
                        done = true;
                        break;
                    }
                }
                out.push((k.to_vec(), val_at(p, i).to_vec()));
                if out.len() >= limit {
                    done = true;
                    break;
                }
            }
            let nextp = if reverse {
                page::prev(p)
            } else {
                page::next(p)
            };
            self.pool_mut().unfix(f);
            if done {
                break;
            }
            pid = nextp;
        }
        Ok(out)
    }

    /// Checks invariants 1-3 of the tree; returns the number of keys.
    fn bt_check(&mut self, root: PageId) -> Result<usize> {
        fn walk<A: PageAccess + ?Sized>(
            e: &mut A,
            pid: PageId,
            lo: Option<Vec<u8>>,
            hi: Option<Vec<u8>>,
            depth: usize,
            leaf_depth: &mut Option<usize>,
            count: &mut usize,
        ) -> Result<()> {
            let f = e.fix(pid, Fix::Read)?;
            let p = e.pool().page(f).to_vec();
            e.pool_mut().unfix(f);
            let bad = |why: String| Err(Error::Corrupt { pid, why });
            let n = slotted::nslots(&p);
            for i in 0..n {
                let k = key_at(&p, i);
                if i > 0 && key_at(&p, i - 1) >= k {
                    return bad("keys out of order".into());
                }
                if lo.as_deref().is_some_and(|l| k < l) || hi.as_deref().is_some_and(|h| k >= h) {
                    return bad("key outside its parent's range".into());
                }
            }
            match page::page_type(&p) {
                PageType::BTreeLeaf => {
                    if *leaf_depth.get_or_insert(depth) != depth {
                        return bad("leaves at different depths".into());
                    }
                    *count += n;
                    Ok(())
                }
                PageType::BTreeInner => {
                    for c in 0..=n {
                        let clo = if c == 0 {
                            lo.clone()
                        } else {
                            Some(key_at(&p, c - 1).to_vec())
                        };
                        let chi = if c == n {
                            hi.clone()
                        } else {
                            Some(key_at(&p, c).to_vec())
                        };
                        walk(e, child_at(&p, c), clo, chi, depth + 1, leaf_depth, count)?;
                    }
                    Ok(())
                }
                _ => bad("not a B-tree page".into()),
            }
        }
        let mut count = 0;
        walk(self, root, None, None, 0, &mut None, &mut count)?;
        // The leaf chain, both ways.
        let fwd = self.bt_scan(root, Bound::Unbounded, Bound::Unbounded, false, usize::MAX)?;
        let bwd = self.bt_scan(root, Bound::Unbounded, Bound::Unbounded, true, usize::MAX)?;
        if fwd.len() != count || bwd.len() != count || fwd.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err(Error::Corrupt {
                pid: root,
                why: format!(
                    "leaf chain holds {}/{} keys, the tree {count}",
                    fwd.len(),
                    bwd.len()
                ),
            });
        }
        Ok(count)
    }
}
