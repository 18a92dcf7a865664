//! The write path's batch insert (`MemoryStore.add_linked`) handing its
//! pairs back as numpy columns.

use jevmem_core::types::NodeId;
use jevmem_core::writing::{LinkedBatch, PairColumns};
use numpy::{IntoPyArray, PyArray1};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

/// (ids, pairs, neighbours): the pair columns as a dict of arrays.
pub type LinkedTuple<'py> = (Vec<NodeId>, Bound<'py, PyDict>, Bound<'py, PyDict>);

fn columns<'py>(py: Python<'py>, p: PairColumns) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    let f32s = |v: Vec<f32>| -> Bound<'py, PyArray1<f64>> {
        // float64 like every signal column the controller reads
        v.into_iter()
            .map(f64::from)
            .collect::<Vec<f64>>()
            .into_pyarray(py)
    };
    let items: [(&str, Bound<'py, PyAny>); 10] = [
        ("row", p.row.into_pyarray(py).into_any()),
        ("candidate", p.candidate.into_pyarray(py).into_any()),
        ("vector", f32s(p.vector).into_any()),
        ("lexical", f32s(p.lexical).into_any()),
        ("entity", f32s(p.entity).into_any()),
        ("temporal", f32s(p.temporal).into_any()),
        ("same_session", p.same_session.into_pyarray(py).into_any()),
        ("same_speaker", p.same_speaker.into_pyarray(py).into_any()),
        ("older", p.older.into_pyarray(py).into_any()),
        ("alias", p.alias.into_pyarray(py).into_any()),
    ];
    // one str per distinct candidate, shared by its pairs (so Python hashes
    // a long text once, whatever the number of pairs that carry it)
    let distinct: Vec<Bound<'py, PyString>> =
        p.texts.iter().map(|t| PyString::new(py, t)).collect();
    let texts = PyList::new(py, p.text.iter().map(|&i| &distinct[i as usize]))?;
    let lists: [(&str, Bound<'py, PyAny>); 3] = [
        ("text", texts.into_any()),
        ("speaker", p.speaker.into_pyobject(py)?.into_any()),
        ("timestamp", p.timestamp.into_pyobject(py)?.into_any()),
    ];
    for (name, col) in items.into_iter().chain(lists) {
        out.set_item(name, col)?;
    }
    Ok(out)
}

pub fn linked_to_python(py: Python<'_>, b: LinkedBatch) -> PyResult<LinkedTuple<'_>> {
    Ok((b.ids, columns(py, b.pairs)?, columns(py, b.neighbours)?))
}
