//! Map core errors onto the Python exception tree defined in `jevmem.errors`.

use jevmem_core::Error;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

/// One class of `jevmem.errors`, imported the first time it is raised.
struct ErrorClass {
    name: &'static str,
    class: PyOnceLock<Py<PyType>>,
}

impl ErrorClass {
    const fn new(name: &'static str) -> Self {
        ErrorClass {
            name,
            class: PyOnceLock::new(),
        }
    }

    fn err(&self, py: Python<'_>, msg: String) -> PyErr {
        match self.class.import(py, "jevmem.errors", self.name) {
            Ok(cls) => PyErr::from_type(cls.clone(), msg),
            Err(import_error) => import_error,
        }
    }
}

static INVALID_INPUT: ErrorClass = ErrorClass::new("InvalidInputError");
static DIMENSION_MISMATCH: ErrorClass = ErrorClass::new("DimensionMismatchError");
static INVALID_SCORE: ErrorClass = ErrorClass::new("InvalidScoreError");
static INVALID_CONFIG: ErrorClass = ErrorClass::new("InvalidConfigError");
static NODE_NOT_FOUND: ErrorClass = ErrorClass::new("NodeNotFoundError");
static TRAVERSAL_STATE: ErrorClass = ErrorClass::new("TraversalStateError");
static SNAPSHOT: ErrorClass = ErrorClass::new("SnapshotError");
static VECTOR_INDEX: ErrorClass = ErrorClass::new("VectorIndexError");
static INVALID_TYPE: ErrorClass = ErrorClass::new("InvalidTypeError");
static DURABILITY: ErrorClass = ErrorClass::new("DurabilityError");

pub fn to_py(err: Error) -> PyErr {
    Python::attach(|py| {
        let msg = err.to_string();
        let class = match err {
            Error::InvalidInput(_) => &INVALID_INPUT,
            Error::DimensionMismatch { .. } => &DIMENSION_MISMATCH,
            Error::InvalidScore { .. } => &INVALID_SCORE,
            Error::InvalidConfig(_) => &INVALID_CONFIG,
            Error::NodeNotFound(_) => &NODE_NOT_FOUND,
            Error::InvalidState(_) => &TRAVERSAL_STATE,
            Error::Snapshot(_) => &SNAPSHOT,
            Error::Index(_) => &VECTOR_INDEX,
            Error::Durability(_) => &DURABILITY,
            // with its errno, so Python picks the subclass (FileNotFoundError,
            // PermissionError, ...) and `errno` reads it
            Error::Io(e) => {
                return match e.raw_os_error() {
                    Some(code) => {
                        let text = e.to_string();
                        let suffix = format!(" (os error {code})");
                        let reason = text.strip_suffix(&suffix).unwrap_or(&text).to_owned();
                        pyo3::exceptions::PyOSError::new_err((code, reason))
                    }
                    None => pyo3::exceptions::PyOSError::new_err(e.to_string()),
                }
            }
        };
        class.err(py, msg)
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
        INVALID_INPUT.err(py, msg)
    } else {
        INVALID_TYPE.err(py, msg)
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

/// A timestamp argument (Unix seconds, or None): a bool is refused, though
/// Python counts it an int (True is never a time).
pub fn timestamp_arg(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<Option<i64>> {
    if obj.is_instance_of::<pyo3::types::PyBool>() {
        return Err(INVALID_TYPE.err(obj.py(), format!("{field}: a bool is not a timestamp")));
    }
    extract_arg(obj, field)
}

/// A setting of a config (None: its default): what Python cannot convert,
/// or a bool (True is never a count or a number), is `InvalidConfigError`
/// naming the setting.
pub fn setting_arg<T>(obj: Option<&Bound<'_, PyAny>>, name: &str) -> PyResult<Option<T>>
where
    for<'a, 'py> T: FromPyObject<'a, 'py>,
    for<'a, 'py> <T as FromPyObject<'a, 'py>>::Error: Into<PyErr>,
{
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(None);
    };
    let py = obj.py();
    if obj.is_instance_of::<pyo3::types::PyBool>() || is_numpy_bool(obj) {
        return Err(INVALID_CONFIG.err(py, format!("{name} must be a number, not a bool")));
    }
    obj.extract::<T>()
        .map(Some)
        .map_err(|e| INVALID_CONFIG.err(py, format!("{name}: {}", e.into().value(py))))
}

/// Whether `obj` is numpy's bool scalar (`numpy.bool_`), which converts to
/// a number as Python's bool does but is no subclass of it.
fn is_numpy_bool(obj: &Bound<'_, PyAny>) -> bool {
    let ty = obj.get_type();
    let named = |r: PyResult<Bound<'_, pyo3::types::PyString>>, want: &[&str]| {
        r.is_ok_and(|s| want.iter().any(|w| s.to_str().is_ok_and(|v| v == *w)))
    };
    named(ty.module(), &["numpy"]) && named(ty.name(), &["bool", "bool_"])
}

/// A node id argument of the store's public calls: an int that names no
/// node (negative, past 64 bits) is `NodeNotFoundError`, as an unknown id
/// is; a bool or anything else `InvalidTypeError`.
pub fn node_id_arg(obj: &Bound<'_, PyAny>) -> PyResult<u64> {
    let py = obj.py();
    if obj.is_instance_of::<pyo3::types::PyBool>() {
        return Err(INVALID_TYPE.err(py, "a node id must be an int, not a bool".to_owned()));
    }
    match obj.extract::<u64>() {
        Ok(id) => Ok(id),
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(py) => {
            Err(NODE_NOT_FOUND.err(py, format!("no node with id {obj}")))
        }
        Err(e) => Err(INVALID_TYPE.err(py, format!("a node id must be an int: {}", e.value(py)))),
    }
}

/// A list of node ids (`node_id_arg` each).
pub fn node_ids_arg(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
    if obj.is_instance_of::<pyo3::types::PyString>() {
        return Err(INVALID_TYPE.err(
            obj.py(),
            "node ids must be a list of ints, not a str".to_owned(),
        ));
    }
    let items: Vec<Bound<'_, PyAny>> = obj.extract().map_err(|e: PyErr| {
        INVALID_TYPE.err(
            obj.py(),
            format!("node ids must be a list of ints: {}", e.value(obj.py())),
        )
    })?;
    items.iter().map(node_id_arg).collect()
}

/// An embedding argument of the store's write calls: what numpy cannot
/// read as a vector of floats (a wrong shape, a string) refused typed.
pub fn embedding_arg<'py>(
    obj: &Bound<'py, PyAny>,
) -> PyResult<numpy::PyArrayLike1<'py, f32, numpy::AllowTypeChange>> {
    obj.extract()
        .map_err(|e: PyErr| bad_argument(obj.py(), "embedding", e))
}

/// The embeddings of a batch (one row per text), refused as `embedding_arg` refuses.
pub fn embeddings_arg<'py>(
    obj: &Bound<'py, PyAny>,
) -> PyResult<numpy::PyArrayLike2<'py, f32, numpy::AllowTypeChange>> {
    obj.extract()
        .map_err(|e: PyErr| bad_argument(obj.py(), "embeddings", e))
}

/// A list of timestamp arguments (`timestamp_arg` each), or None.
pub fn timestamps_arg(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<Option<Vec<Option<i64>>>> {
    let Some(items) = extract_arg::<Option<Vec<Bound<'_, PyAny>>>>(obj, field)? else {
        return Ok(None);
    };
    items
        .iter()
        .enumerate()
        .map(|(i, t)| timestamp_arg(t, &format!("{field}[{i}]")))
        .collect::<PyResult<Vec<_>>>()
        .map(Some)
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
