//! The transactional storage engine (see issue "storage engine").
