//! dftl (being written)
use nand::Nand;
use crate::block_device::FtlError;
use crate::options::FtlOptions;
#[derive(Debug)]
pub struct Dftl;
impl Dftl {
    pub fn new(_n: Nand, _o: &FtlOptions) -> Result<crate::page::PageFtl, FtlError> { Err(FtlError::Unsupported("dftl".into())) }
    pub fn open(_n: Nand, _o: &FtlOptions) -> Result<crate::page::PageFtl, FtlError> { Err(FtlError::Unsupported("dftl".into())) }
}
