//! Flash management and block-device FTLs (see issue "Block-device FTLs").
