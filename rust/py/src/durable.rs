//! The durable side of a `MemoryStore`: its directory's log, one record per
//! write, and the explicit writes `Memory` groups its calls into.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use jevmem_core::durable::{Durable, Opened};
use jevmem_core::store::MemoryStore as CoreStore;
use jevmem_core::Error;
use parking_lot::RwLock;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::store::MemoryStore;

pub struct DurableHandle {
    pub core: Durable,
    /// A write opened by `_begin_write` is collecting ops.
    explicit: AtomicBool,
    closed: AtomicBool,
}

pub type OpenResult<'py> = (
    MemoryStore,
    Bound<'py, PyBytes>,
    Bound<'py, PyList>,
    Bound<'py, PyDict>,
);

impl DurableHandle {
    fn writable(&self) -> Result<(), Error> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Durability("the memory is closed".into()));
        }
        match self.core.failure() {
            Some(msg) => Err(Error::Durability(msg)),
            None => Ok(()),
        }
    }

    pub fn mutate<T>(
        &self,
        inner: &RwLock<CoreStore>,
        f: impl FnOnce(&mut CoreStore) -> Result<T, Error>,
    ) -> Result<T, Error> {
        self.writable()?;
        let seq = {
            let mut s = inner.write();
            let out = f(&mut s)?;
            if self.explicit.load(Ordering::Acquire) {
                return Ok(out);
            }
            let j = s.take_journal();
            if j.ops == 0 {
                return Ok(out);
            }
            // under the store lock, so the log's order is the store's
            let seq = self.core.append(j.ops, &j.bytes, &[])?;
            (out, seq)
        };
        self.core.wait(seq.1)?;
        Ok(seq.0)
    }

    pub fn begin(&self) -> Result<(), Error> {
        self.writable()?;
        if self.explicit.swap(true, Ordering::AcqRel) {
            return Err(Error::InvalidState(
                "a write is already open on this memory".into(),
            ));
        }
        Ok(())
    }

    pub fn log(&self, inner: &RwLock<CoreStore>, delta: &[u8]) -> Result<Option<u64>, Error> {
        let mut s = inner.write();
        self.explicit.store(false, Ordering::Release);
        let j = s.take_journal();
        if j.ops == 0 && delta.is_empty() {
            return Ok(None);
        }
        self.core.append(j.ops, &j.bytes, delta).map(Some)
    }

    pub fn close(&self) -> Result<(), Error> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        if self.core.failure().is_none() {
            self.core.flush()?;
        }
        Ok(())
    }
}

pub fn opened_to_py(py: Python<'_>, opened: Opened) -> PyResult<OpenResult<'_>> {
    let Opened {
        mut store,
        durable,
        state,
        deltas,
        report,
    } = opened;
    store.set_journaling(true);
    let handle = Arc::new(DurableHandle {
        core: durable,
        explicit: AtomicBool::new(false),
        closed: AtomicBool::new(false),
    });
    let py_store = MemoryStore::in_memory(store);
    *py_store.durable.write() = Some(handle);
    let deltas = PyList::new(py, deltas.iter().map(|d| PyBytes::new(py, d)))?;
    let r = PyDict::new(py);
    r.set_item("created", report.created)?;
    r.set_item("checkpoint_seq", report.checkpoint_seq)?;
    r.set_item("replayed_records", report.replayed_records)?;
    r.set_item("replayed_ops", report.replayed_ops)?;
    r.set_item("segments", report.segments)?;
    r.set_item("torn_tail_bytes", report.torn_tail_bytes)?;
    r.set_item("dropped_records", report.dropped_records)?;
    r.set_item("dropped_bytes", report.dropped_bytes)?;
    r.set_item("dropped_reason", report.dropped_reason)?;
    Ok((py_store, PyBytes::new(py, &state), deltas, r))
}
