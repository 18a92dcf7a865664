//! The core's integration tests, one binary: each test binary links and
//! LTO-optimises the whole crate graph in release (25-40 s apiece on 2
//! cores), so they live as modules of one. `snapshot_fuzz` stays apart: it
//! installs a counting global allocator that other tests would disturb.

mod durable;
mod facts;
mod forget;
mod passages;
mod scopes;
mod store;
