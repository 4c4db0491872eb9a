//! A page store whose log lives on another device: DB pages on `pages` (the flash under test),
//! the log and the master record on `log` (a second store).
//!
//! Why: Shore-MT writes its log as files in a log directory (`sm_logdir`), never on the raw
//! volume, and the NoFTL paper's set-up used the emulated flash as a raw volume (VLDB 2013,
//! Figure 2; its authors' published Shore-MT configuration gives the flash volume
//! `/dev/flashsim_block` and a log directory elsewhere). So in NoFTL Fig. 3 the flash saw page
//! reads and write-backs only; log forces went to another device. `noftl reproduce noftl` runs
//! that set-up; the time a commit waits on that other device belongs to the host side of the
//! model (the CPU profile's per-commit cost, docs/noftl.md "Host CPU in virtual time").
//!
//! Only for experiments: the two stores are not made durable together (a power cut of one
//! does not cut the other), so crash tests do not use it.
//!
//! Invariants:
//! 1. Every log and master-record call goes to `log`, every other call to `pages`; nothing is
//!    written to both.
//! 2. `nand`, `device_report` and the IPA/region/IAA channels are the page device's: the
//!    flash under test is `pages`.

use crate::error::Result;
use crate::pagestore::{PageStore, VictimInfo, WriteHint};
use crate::{Nanos, ObjectId, PageId};
use ftl::FtlReport;
use nand::Nand;

pub struct SplitLogStore {
    pages: Box<dyn PageStore>,
    log: Box<dyn PageStore>,
}

impl std::fmt::Debug for SplitLogStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SplitLogStore")
            .field("pages", &self.pages.name())
            .field("log", &self.log.name())
            .finish()
    }
}

impl SplitLogStore {
    /// DB pages on `pages`, the log and master records on `log`. The page sizes must agree
    /// (the engine reads one size from the store).
    pub fn new(pages: Box<dyn PageStore>, log: Box<dyn PageStore>) -> Result<Self> {
        if pages.page_bytes() != log.page_bytes() {
            return Err(crate::Error::Unsupported(format!(
                "split log: the page store has {}-byte pages, the log store {}",
                pages.page_bytes(),
                log.page_bytes()
            )));
        }
        Ok(SplitLogStore { pages, log })
    }
}

impl PageStore for SplitLogStore {
    fn name(&self) -> String {
        format!("{} (log on {})", self.pages.name(), self.log.name())
    }
    fn page_bytes(&self) -> usize {
        self.pages.page_bytes()
    }
    fn db_pages(&self) -> u64 {
        self.pages.db_pages()
    }
    fn log_blocks(&self) -> u64 {
        self.log.log_blocks()
    }
    fn atomic_write_bytes(&self) -> usize {
        self.pages.atomic_write_bytes()
    }
    fn read_page(&mut self, at_ns: Nanos, pid: PageId, buf: &mut [u8]) -> Result<Nanos> {
        self.pages.read_page(at_ns, pid, buf)
    }
    fn write_page(
        &mut self,
        at_ns: Nanos,
        pid: PageId,
        data: &[u8],
        hint: WriteHint,
    ) -> Result<Nanos> {
        self.pages.write_page(at_ns, pid, data, hint)
    }
    fn sync_pages(&mut self, at_ns: Nanos) -> Result<Nanos> {
        self.pages.sync_pages(at_ns)
    }
    fn ipa_scheme(&self, object: ObjectId) -> Option<crate::ipa::IpaScheme> {
        self.pages.ipa_scheme(object)
    }
    fn write_delta(
        &mut self,
        at_ns: Nanos,
        pid: PageId,
        offset: usize,
        bytes: &[u8],
    ) -> Result<Option<Nanos>> {
        self.pages.write_delta(at_ns, pid, offset, bytes)
    }
    fn read_log(&mut self, at_ns: Nanos, block: u64, buf: &mut [u8]) -> Result<Nanos> {
        self.log.read_log(at_ns, block, buf)
    }
    fn write_log(&mut self, at_ns: Nanos, block: u64, data: &[u8]) -> Result<Nanos> {
        self.log.write_log(at_ns, block, data)
    }
    fn force_log(&mut self, at_ns: Nanos) -> Result<Nanos> {
        self.log.force_log(at_ns)
    }
    fn log_released(&mut self, at_ns: Nanos, block: u64, n: u64) -> Result<Nanos> {
        self.log.log_released(at_ns, block, n)
    }
    fn read_meta(&mut self, at_ns: Nanos, slot: usize, buf: &mut [u8]) -> Result<Nanos> {
        self.log.read_meta(at_ns, slot, buf)
    }
    fn write_meta(&mut self, at_ns: Nanos, slot: usize, data: &[u8]) -> Result<Nanos> {
        self.log.write_meta(at_ns, slot, data)
    }
    fn page_allocated(&mut self, pid: PageId, hint: WriteHint) {
        self.pages.page_allocated(pid, hint)
    }
    fn page_freed(&mut self, at_ns: Nanos, pid: PageId) -> Result<Nanos> {
        self.pages.page_freed(at_ns, pid)
    }
    fn insert_hint(&mut self, object: ObjectId, candidates: &[PageId]) -> Option<PageId> {
        self.pages.insert_hint(object, candidates)
    }
    fn gc_victims(
        &mut self,
        victims: u32,
        known_epoch: u64,
        out: &mut Vec<PageId>,
    ) -> Option<VictimInfo> {
        self.pages.gc_victims(victims, known_epoch, out)
    }
    fn create_region(
        &mut self,
        at_ns: Nanos,
        name: &str,
        options: &[(String, String)],
    ) -> Result<Nanos> {
        self.pages.create_region(at_ns, name, options)
    }
    fn bind_object_region(&mut self, object: ObjectId, region: &str) -> Result<()> {
        self.pages.bind_object_region(object, region)
    }
    fn device_report(&self) -> Option<FtlReport> {
        self.pages.device_report()
    }
    fn nand(&self) -> Option<&Nand> {
        self.pages.nand()
    }
    fn nand_mut(&mut self) -> Option<&mut Nand> {
        self.pages.nand_mut()
    }
    fn retain_allocated(
        &mut self,
        at_ns: Nanos,
        allocated: &dyn Fn(PageId) -> bool,
    ) -> Result<Nanos> {
        self.pages.retain_allocated(at_ns, allocated)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pagestore::{BlockPageStore, LOG_BLOCK_BYTES};
    use ftl::MemDisk;

    fn memdisk(lpns: u64, log_blocks: u64) -> Box<dyn PageStore> {
        Box::new(BlockPageStore::new(Box::new(MemDisk::new(lpns)), 4096, Some(log_blocks)).unwrap())
    }

    #[test]
    fn log_and_master_go_to_the_log_store_and_pages_to_the_page_store() {
        let mut s = SplitLogStore::new(memdisk(128, 16), memdisk(256, 32)).unwrap();
        assert_eq!(s.log_blocks(), 32, "the log's size is the log store's");
        let page = vec![7u8; 4096];
        let block = vec![9u8; LOG_BLOCK_BYTES];
        s.write_page(
            0,
            3,
            &page,
            WriteHint {
                object: 1,
                kind: crate::pagestore::PageKind::Heap,
            },
        )
        .unwrap();
        s.write_log(0, 20, &block).unwrap();
        s.write_meta(0, 1, &block).unwrap();
        let mut buf = vec![0u8; 4096];
        s.read_page(0, 3, &mut buf).unwrap();
        assert_eq!(buf, page);
        s.read_log(0, 20, &mut buf[..LOG_BLOCK_BYTES]).unwrap();
        assert_eq!(&buf[..LOG_BLOCK_BYTES], &block[..]);
        // Block 20 lies beyond the page store's 16 log blocks: it can only be on the log store.
        let (pages, mut log) = (s.pages, s.log);
        let mut b = vec![0u8; LOG_BLOCK_BYTES];
        log.read_log(0, 20, &mut b).unwrap();
        assert_eq!(b, block);
        log.read_meta(0, 1, &mut b).unwrap();
        assert_eq!(b, block);
        assert_eq!(pages.log_blocks(), 16);
    }

    #[test]
    fn stores_of_different_page_sizes_are_refused() {
        let eight: Box<dyn PageStore> =
            Box::new(BlockPageStore::new(Box::new(MemDisk::new(256)), 8192, Some(16)).unwrap());
        assert!(SplitLogStore::new(memdisk(128, 16), eight).is_err());
    }
}
