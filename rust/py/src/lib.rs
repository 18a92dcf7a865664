//! PyO3 bindings for jevmem-core: the `jevmem._core` extension module.
//! Thin by design: argument conversion, GIL release, error mapping.

// Python keyword-argument signatures map to many Rust parameters by design.
#![allow(clippy::too_many_arguments)]

mod durable;
mod errors;
mod read;
mod scope;
mod store;
mod text_analysis;
mod traversal;
mod validity;
mod writing;

use pyo3::prelude::*;

/// Switch a named failure point of the durable path on ("eio", "enospc",
/// "abort") or off ("off"). For crash and I/O-error tests only.
#[pyfunction]
#[pyo3(name = "_set_failpoint")]
fn set_failpoint(name: &str, action: &str) -> PyResult<()> {
    let parsed = jevmem_core::failpoint::Action::parse(action).ok_or_else(|| {
        pyo3::exceptions::PyValueError::new_err(format!(
            "failpoint action {action:?}: expected eio, enospc, abort or off"
        ))
    })?;
    jevmem_core::failpoint::set(name, parsed).map_err(pyo3::exceptions::PyValueError::new_err)
}

// Free-threaded CPython may run this module without the GIL: every pyclass
// is frozen, the store sits behind one RwLock and a traversal behind a
// Mutex, and nothing mutable is reached outside them. (The abi3 wheel does
// not load on a free-threaded interpreter; a build for that version does.)
#[pymodule(gil_used = false)]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add(
        "DEFAULT_MAX_TEXT_BYTES",
        jevmem_core::store::DEFAULT_MAX_CONTENT_BYTES,
    )?;
    // the largest write-ahead log record: one durable write request at most
    m.add(
        "MAX_LOG_RECORD_BYTES",
        jevmem_core::durable::wal::MAX_RECORD_BYTES,
    )?;
    // the precisions a grounded time reference may carry (what the store keeps)
    m.add("TIME_PRECISIONS", jevmem_core::derived::PRECISIONS.to_vec())?;
    // the columns of `MemoryStore.read_signals`, in order
    m.add(
        "SIGNAL_COLUMNS",
        jevmem_core::signals::SIGNAL_COLUMNS.to_vec(),
    )?;
    // the validity columns of `ReadSession.signals`, in order
    m.add("FACT_COLUMNS", jevmem_core::read::FACT_COLUMNS.to_vec())?;
    // the columns `ReadSession.round` adds to a candidate's signals, in order
    m.add("ROUND_COLUMNS", jevmem_core::read::ROUND_COLUMNS.to_vec())?;
    // provenance keys whose values name entities, and those that may list several
    m.add(
        "ENTITY_PROVENANCE_KEYS",
        jevmem_core::entities::ENTITY_PROVENANCE_KEYS.to_vec(),
    )?;
    m.add(
        "LIST_PROVENANCE_KEYS",
        jevmem_core::entities::LIST_PROVENANCE_KEYS.to_vec(),
    )?;
    m.add_class::<store::MemoryStore>()?;
    m.add_class::<store::Node>()?;
    m.add_class::<store::Edge>()?;
    m.add_class::<store::WriteCandidate>()?;
    m.add_class::<store::Supersedes>()?;
    m.add_class::<scope::Allowed>()?;
    m.add_class::<traversal::Traversal>()?;
    m.add_class::<traversal::TraversalConfig>()?;
    m.add_class::<traversal::Candidate>()?;
    m.add_class::<traversal::Evidence>()?;
    m.add_class::<validity::FactState>()?;
    m.add_class::<read::ReadSession>()?;
    m.add_function(wrap_pyfunction!(traversal::rrf, m)?)?;
    m.add_function(wrap_pyfunction!(traversal::largest_remainder, m)?)?;
    m.add_function(wrap_pyfunction!(traversal::view_budgets, m)?)?;
    m.add_function(wrap_pyfunction!(traversal::depth_limit, m)?)?;
    m.add_function(wrap_pyfunction!(text_analysis::normalise_entity, m)?)?;
    m.add_function(wrap_pyfunction!(text_analysis::extract_entities, m)?)?;
    m.add_function(wrap_pyfunction!(text_analysis::extract_entities_batch, m)?)?;
    m.add_function(wrap_pyfunction!(text_analysis::entity_mentions, m)?)?;
    m.add_function(wrap_pyfunction!(text_analysis::ground_times, m)?)?;
    m.add_function(wrap_pyfunction!(text_analysis::ground_times_batch, m)?)?;
    m.add_function(wrap_pyfunction!(text_analysis::query_time_cues, m)?)?;
    m.add_function(wrap_pyfunction!(text_analysis::query_fact_time, m)?)?;
    m.add_function(wrap_pyfunction!(text_analysis::speaks_in_first_person, m)?)?;
    m.add_function(wrap_pyfunction!(text_analysis::names_a_speaker, m)?)?;
    m.add_function(wrap_pyfunction!(text_analysis::question_share, m)?)?;
    m.add_class::<text_analysis::PatternCounter>()?;
    m.add_class::<text_analysis::WordSet>()?;
    m.add_function(wrap_pyfunction!(set_failpoint, m)?)?;
    Ok(())
}
