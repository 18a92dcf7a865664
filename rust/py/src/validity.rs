//! `jevmem._core.FactState`: one query's record of the facts that change
//! (which held at the time it asks about, which rank below them), with the
//! reads that fill it. The rules are `jevmem_core::validity`'s.

use jevmem_core::error::Error;
use jevmem_core::validity::{ChainMatchQuery, FactState as CoreFactState, FactTime};
use jevmem_core::NodeId;
use numpy::{AllowTypeChange, IntoPyArray, PyArray2, PyArrayLike1};
use parking_lot::Mutex;
use pyo3::prelude::*;

use crate::errors::IntoPyResult;
use crate::scope::Allowed;
use crate::store::MemoryStore;

/// The time a query wants facts to hold at, from `jevmem.temporal.FactTime`'s fields.
pub(crate) fn fact_time(
    stance: &str,
    at: Option<i64>,
    until: Option<i64>,
) -> Result<FactTime, Error> {
    match (stance, at, until) {
        ("neutral", _, _) => Ok(FactTime::Neutral),
        ("past", _, _) => Ok(FactTime::Past),
        ("present", at, _) => Ok(FactTime::Present(at)),
        ("dated", Some(from), Some(to)) => Ok(FactTime::Window(from, to)),
        ("dated", _, _) => Err(Error::InvalidInput(
            "a dated fact time needs `at` and `until`".into(),
        )),
        (other, _, _) => Err(Error::InvalidInput(format!(
            "fact time stance must be neutral, past, present or dated, got {other:?}"
        ))),
    }
}

/// One query's record of the facts it measured, for the time it asks about
/// (`stance`, `at`, `until`: see `jevmem.temporal.FactTime`).
#[pyclass(frozen, module = "jevmem._core")]
pub struct FactState {
    time: FactTime,
    state: Mutex<CoreFactState>,
}

#[pymethods]
impl FactState {
    #[new]
    #[pyo3(signature = (stance, at = None, until = None))]
    fn new(stance: &str, at: Option<i64>, until: Option<i64>) -> PyResult<Self> {
        Ok(Self {
            time: fact_time(stance, at, until).py()?,
            state: Mutex::new(CoreFactState::default()),
        })
    }

    /// The validity signals of `ids`, an (n, 4) float64 array (valid at the
    /// query's time, superseded, not yet valid, chain match; NaN for a node
    /// in no chain), recording which facts held; None when the query asks
    /// about no time or no node is in a chain. An unknown id raises
    /// NodeNotFoundError and records nothing.
    #[pyo3(signature = (store, ids, *, query, vector, best_lexical, best_dense, allowed = None))]
    #[allow(clippy::too_many_arguments)]
    fn signals<'py>(
        &self,
        py: Python<'py>,
        store: &MemoryStore,
        ids: Vec<NodeId>,
        query: String,
        vector: PyArrayLike1<'py, f32, AllowTypeChange>,
        best_lexical: f64,
        best_dense: f64,
        allowed: Option<PyRef<'_, Allowed>>,
    ) -> PyResult<Option<Bound<'py, PyArray2<f64>>>> {
        let vector = vector.as_array().to_vec();
        let allowed = allowed.map(|a| a.inner.clone());
        let q = ChainMatchQuery {
            text: &query,
            vector: &vector,
            best_lexical,
            best_dense,
        };
        let got = store
            .read(py, |s| {
                let mut state = self.state.lock();
                // on an error the record is left as it was
                let mut next = state.clone();
                let cols = s.fact_signals(&mut next, &ids, self.time, &q, allowed.as_deref())?;
                *state = next;
                Ok::<_, Error>(cols)
            })
            .py()?;
        Ok(got.map(|c| {
            let n = c.valid_at_query_time.len();
            let mut flat = Vec::with_capacity(4 * n);
            for i in 0..n {
                flat.extend([
                    c.valid_at_query_time[i],
                    c.superseded[i],
                    c.not_yet_valid[i],
                    c.chain_match[i],
                ]);
            }
            numpy::ndarray::Array2::from_shape_vec((n, 4), flat)
                .expect("four per row")
                .into_pyarray(py)
        }))
    }

    /// The nodes one supersedes link away from any of `ids` (in order, with
    /// repeats); none when the query asks about no time.
    #[pyo3(signature = (store, ids, *, allowed = None))]
    fn chain_relatives(
        &self,
        py: Python<'_>,
        store: &MemoryStore,
        ids: Vec<NodeId>,
        allowed: Option<PyRef<'_, Allowed>>,
    ) -> Vec<NodeId> {
        let allowed = allowed.map(|a| a.inner.clone());
        store.read(py, |s| {
            s.chain_relatives(&ids, self.time, allowed.as_deref())
        })
    }

    /// The facts measured so far that did not hold at the query's time, each
    /// with the facts of its chain that did, ascending.
    fn replaced(&self) -> Vec<(NodeId, Vec<NodeId>)> {
        self.state.lock().replaced()
    }
}
