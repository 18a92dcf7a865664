//! The core's integration tests, one binary: each test binary links and
//! LTO-optimises the whole crate graph in release (25-40 s apiece on 2
//! cores), so they live as modules of one. proptest keeps their failure
//! seeds in `tests/proptest-regressions/<module>.txt`.

mod context;
mod durable;
mod facts;
mod forget;
mod passages;
mod scopes;
mod snapshot_fuzz;
mod store;
mod style;
mod writing;
