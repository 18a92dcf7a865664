//! Map core errors onto the Python exception tree defined in `jevmem.errors`.

use jevmem_core::Error;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

static CLASSES: [PyOnceLock<Py<PyType>>; 10] = [const { PyOnceLock::new() }; 10];
const NAMES: [&str; 10] = [
    "InvalidInputError",
    "DimensionMismatchError",
    "InvalidScoreError",
    "InvalidConfigError",
    "NodeNotFoundError",
    "TraversalStateError",
    "SnapshotError",
    "VectorIndexError",
    "InvalidTypeError",
    "DurabilityError",
];

fn raise(py: Python<'_>, which: usize, msg: String) -> PyErr {
    match CLASSES[which].import(py, "jevmem.errors", NAMES[which]) {
        Ok(cls) => PyErr::from_type(cls.clone(), msg),
        Err(import_error) => import_error,
    }
}

pub fn to_py(err: Error) -> PyErr {
    Python::attach(|py| {
        let msg = err.to_string();
        match err {
            Error::InvalidInput(_) => raise(py, 0, msg),
            Error::DimensionMismatch { .. } => raise(py, 1, msg),
            Error::InvalidScore { .. } => raise(py, 2, msg),
            Error::InvalidConfig(_) => raise(py, 3, msg),
            Error::NodeNotFound(_) => raise(py, 4, msg),
            Error::InvalidState(_) => raise(py, 5, msg),
            Error::Snapshot(_) => raise(py, 6, msg),
            Error::Index(_) => raise(py, 7, msg),
            Error::Durability(_) => raise(py, 9, msg),
            Error::Io(e) => pyo3::exceptions::PyOSError::new_err(e.to_string()),
        }
    })
}

/// An argument Python could not convert, as a jevmem error naming it: a
/// value out of range (an int past 64 bits) or text that is not valid
/// Unicode (a lone surrogate) is `InvalidInputError`, anything else (a
/// wrong type, a str where a list is expected) `InvalidTypeError`.
pub fn bad_argument(py: Python<'_>, field: &str, err: PyErr) -> PyErr {
    use pyo3::exceptions::{PyOverflowError, PyUnicodeError, PyValueError};
    let msg = format!("{field}: {}", err.value(py));
    if err.is_instance_of::<PyOverflowError>(py)
        || err.is_instance_of::<PyUnicodeError>(py)
        || err.is_instance_of::<PyValueError>(py)
    {
        raise(py, 0, msg)
    } else {
        raise(py, 8, msg)
    }
}

/// Extract an argument, refusing a bad one with `bad_argument`.
pub fn extract_arg<'a, 'py, T>(obj: &'a Bound<'py, PyAny>, field: &str) -> PyResult<T>
where
    T: FromPyObject<'a, 'py>,
    T::Error: Into<PyErr>,
{
    obj.extract::<T>()
        .map_err(|e| bad_argument(obj.py(), field, e.into()))
}

/// `?`-friendly conversion for core results.
pub trait IntoPyResult<T> {
    fn py(self) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for Result<T, Error> {
    fn py(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}
