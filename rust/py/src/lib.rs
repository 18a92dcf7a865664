//! PyO3 bindings for jevmem-core: the `jevmem._core` extension module.
//! Thin by design: argument conversion, GIL release, error mapping.

mod errors;
mod store;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<store::MemoryStore>()?;
    m.add_class::<store::Node>()?;
    m.add_class::<store::Edge>()?;
    m.add_class::<store::WriteCandidate>()?;
    Ok(())
}
