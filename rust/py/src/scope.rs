//! Scopes, metadata and filters as Python passes them: plain dicts, so the
//! same values travel through JSON (gRPC, MCP) unchanged.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use jevmem_core::filter::{Allowed as CoreAllowed, Field, Filter, Selection, MAX_FILTER_DEPTH};
use jevmem_core::store::MemoryStore as CoreStore;
use jevmem_core::style::StyleBasis;
use jevmem_core::{Error, MetaValue, NodeId};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::errors::IntoPyResult;

fn invalid(msg: impl Into<String>) -> PyErr {
    Err::<(), _>(Error::InvalidInput(msg.into()))
        .py()
        .unwrap_err()
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "?".to_string(), |n| n.to_string())
}

/// A Python str as a Rust String (a lone surrogate is refused, typed).
fn text(what: &str, obj: &Bound<'_, PyAny>) -> PyResult<String> {
    let s = obj
        .cast::<PyString>()
        .map_err(|_| invalid(format!("{what} must be a string, got {}", type_name(obj))))?;
    s.to_str()
        .map(str::to_owned)
        .map_err(|_| invalid(format!("{what} is not valid Unicode (a lone surrogate?)")))
}

/// A metadata or filter value: str, bool, int (64-bit) or float.
pub fn meta_value(what: &str, obj: &Bound<'_, PyAny>) -> PyResult<MetaValue> {
    if obj.is_instance_of::<PyBool>() {
        return Ok(MetaValue::Bool(obj.extract::<bool>()?));
    }
    if obj.is_instance_of::<PyInt>() {
        return obj
            .extract::<i64>()
            .map(MetaValue::Int)
            .map_err(|_| invalid(format!("{what} does not fit in 64 bits: {obj}")));
    }
    if obj.is_instance_of::<PyFloat>() {
        return Ok(MetaValue::Float(obj.extract::<f64>()?));
    }
    if obj.is_instance_of::<PyString>() {
        return text(what, obj).map(MetaValue::Str);
    }
    Err(invalid(format!(
        "{what} must be a str, int, float or bool, got {}",
        type_name(obj)
    )))
}

pub fn meta_to_py<'py>(py: Python<'py>, v: &MetaValue) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        MetaValue::Str(s) => PyString::new(py, s).into_any(),
        MetaValue::Int(i) => i.into_pyobject(py)?.into_any(),
        MetaValue::Float(f) => PyFloat::new(py, *f).into_any(),
        MetaValue::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
    })
}

fn dict<'a, 'py>(what: &str, obj: &'a Bound<'py, PyAny>) -> PyResult<&'a Bound<'py, PyDict>> {
    obj.cast::<PyDict>()
        .map_err(|_| invalid(format!("{what} must be a dict, got {}", type_name(obj))))
}

/// A scope dict {str: str} (None: global). Validation of the pairs is the core's.
pub fn scope_arg(what: &str, obj: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<(String, String)>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(Vec::new());
    };
    let d = dict(what, obj)?;
    let mut out = Vec::with_capacity(d.len());
    for (k, v) in d.iter() {
        let key = text(&format!("{what} key"), &k)?;
        let value = text(&format!("{what} value of {key:?}"), &v)?;
        out.push((key, value));
    }
    Ok(out)
}

/// A metadata dict {str: str | int | float | bool} (None: empty).
pub fn metadata_arg(
    what: &str,
    obj: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<(String, MetaValue)>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(Vec::new());
    };
    let d = dict(what, obj)?;
    let mut out = Vec::with_capacity(d.len());
    for (k, v) in d.iter() {
        let key = text(&format!("{what} key"), &k)?;
        let value = meta_value(&format!("{what} value of {key:?}"), &v)?;
        out.push((key, value));
    }
    Ok(out)
}

/// An optional idempotency key.
pub fn key_arg(what: &str, obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<String>> {
    match obj.filter(|o| !o.is_none()) {
        None => Ok(None),
        Some(o) => text(what, o).map(Some),
    }
}

fn field(name: &str) -> PyResult<Field> {
    match name {
        "$timestamp" => Ok(Field::Timestamp),
        n if n.starts_with('$') => Err(invalid(format!(
            "filter: unknown operator {n:?} (expected $and, $or, $not or a field name; \
             $timestamp is the observation time)"
        ))),
        n => Ok(Field::Meta(n.to_string())),
    }
}

fn list<'py>(what: &str, obj: &Bound<'py, PyAny>) -> PyResult<Vec<Bound<'py, PyAny>>> {
    if let Ok(l) = obj.cast::<PyList>() {
        return Ok(l.iter().collect());
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        return Ok(t.iter().collect());
    }
    Err(invalid(format!(
        "{what} must be a list, got {}",
        type_name(obj)
    )))
}

/// One field's condition: a plain value (equality) or a dict of operators.
fn condition(name: &str, obj: &Bound<'_, PyAny>) -> PyResult<Filter> {
    let f = field(name)?;
    let Ok(ops) = obj.cast::<PyDict>() else {
        let what = format!("filter value for {name:?}");
        return Ok(Filter::Eq(f, meta_value(&what, obj)?));
    };
    if ops.is_empty() {
        return Err(invalid(format!("filter: no operator for {name:?}")));
    }
    let mut terms = Vec::new();
    let (mut gt, mut gte, mut lt, mut lte) = (None, None, None, None);
    for (op, v) in ops.iter() {
        let op = text(&format!("filter operator for {name:?}"), &op)?;
        let what = format!("filter {op} value for {name:?}");
        match op.as_str() {
            "$eq" => terms.push(Filter::Eq(f.clone(), meta_value(&what, &v)?)),
            "$ne" => terms.push(Filter::Not(Box::new(Filter::Eq(
                f.clone(),
                meta_value(&what, &v)?,
            )))),
            "$in" | "$nin" => {
                let values = list(&what, &v)?
                    .iter()
                    .map(|x| meta_value(&what, x))
                    .collect::<PyResult<Vec<_>>>()?;
                let t = Filter::In(f.clone(), values);
                terms.push(if op == "$in" {
                    t
                } else {
                    Filter::Not(Box::new(t))
                });
            }
            "$gt" => gt = Some(meta_value(&what, &v)?),
            "$gte" => gte = Some(meta_value(&what, &v)?),
            "$lt" => lt = Some(meta_value(&what, &v)?),
            "$lte" => lte = Some(meta_value(&what, &v)?),
            "$exists" => {
                if !v.is_instance_of::<PyBool>() {
                    return Err(invalid(format!("{what} must be True or False")));
                }
                let t = Filter::Exists(f.clone());
                terms.push(if v.extract::<bool>()? {
                    t
                } else {
                    Filter::Not(Box::new(t))
                });
            }
            other => {
                return Err(invalid(format!(
                    "filter: unknown operator {other:?} for {name:?} (expected $eq, $ne, \
                     $in, $nin, $gt, $gte, $lt, $lte or $exists)"
                )))
            }
        }
    }
    if gt.is_some() || gte.is_some() || lt.is_some() || lte.is_some() {
        terms.push(Filter::Range {
            field: f,
            gt,
            gte,
            lt,
            lte,
        });
    }
    Ok(if terms.len() == 1 {
        terms.pop().expect("one term")
    } else {
        Filter::And(terms)
    })
}

/// A filter dict: every key is a condition and all must hold.
fn filter_dict(obj: &Bound<'_, PyAny>, depth: usize) -> PyResult<Filter> {
    if depth > MAX_FILTER_DEPTH {
        return Err(invalid(format!(
            "filter nests deeper than {MAX_FILTER_DEPTH} levels"
        )));
    }
    let d = dict("filter", obj)?;
    let mut terms = Vec::with_capacity(d.len());
    for (k, v) in d.iter() {
        let key = text("filter key", &k)?;
        match key.as_str() {
            "$and" | "$or" => {
                let parts = list(&format!("filter {key}"), &v)?
                    .iter()
                    .map(|x| filter_dict(x, depth + 1))
                    .collect::<PyResult<Vec<_>>>()?;
                terms.push(if key == "$and" {
                    Filter::And(parts)
                } else {
                    Filter::Or(parts)
                });
            }
            "$not" => terms.push(Filter::Not(Box::new(filter_dict(&v, depth + 1)?))),
            _ => terms.push(condition(&key, &v)?),
        }
    }
    Ok(if terms.len() == 1 {
        terms.pop().expect("one term")
    } else {
        Filter::And(terms)
    })
}

/// Scope and filter arguments as one validated selection.
pub fn selection_arg(
    scope: Option<&Bound<'_, PyAny>>,
    filter: Option<&Bound<'_, PyAny>>,
) -> PyResult<Selection> {
    let scope = scope_arg("scope", scope)?;
    let filter = match filter.filter(|f| !f.is_none()) {
        None => None,
        // an empty dict asks for nothing: the unscoped path, not a check per node
        Some(f) if f.cast::<PyDict>().is_ok_and(|d| d.is_empty()) => None,
        Some(f) => Some(filter_dict(f, 1)?),
    };
    Selection::new(scope, filter).py()
}

/// The nodes one scoped or filtered read may see (`MemoryStore.select`): a
/// snapshot of the memory when it was made, handed to each index the read
/// asks, so every ranking is computed among these nodes only.
#[pyclass(frozen, module = "jevmem._core")]
pub struct Allowed {
    pub(crate) inner: Arc<CoreAllowed>,
    /// The style basis of the nodes it allows (`MemoryStore.styles`),
    /// computed on first use: one read's signals ask for it batch by batch.
    pub(crate) style_basis: OnceLock<StyleBasis>,
}

impl Allowed {
    pub(crate) fn new(inner: CoreAllowed) -> Self {
        Self {
            inner: Arc::new(inner),
            style_basis: OnceLock::new(),
        }
    }

    /// The style basis of the nodes it allows in `store`, worked out once.
    pub(crate) fn basis(&self, store: &CoreStore) -> &StyleBasis {
        self.style_basis
            .get_or_init(|| store.style_basis(&self.inner))
    }
}

#[pymethods]
impl Allowed {
    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __contains__(&self, id: NodeId) -> bool {
        self.inner.contains(id)
    }

    /// The allowed ids, ascending.
    fn ids(&self) -> Vec<NodeId> {
        self.inner.ids().to_vec()
    }

    fn __repr__(&self) -> String {
        format!("Allowed({} nodes)", self.inner.len())
    }
}

/// A Python dict of a node's metadata.
pub fn metadata_dict(pairs: &[(String, MetaValue)]) -> HashMap<String, MetaPy> {
    pairs
        .iter()
        .map(|(k, v)| (k.clone(), MetaPy(v.clone())))
        .collect()
}

/// A metadata value on its way to Python.
#[derive(Clone)]
pub struct MetaPy(pub MetaValue);

impl<'py> IntoPyObject<'py> for MetaPy {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        meta_to_py(py, &self.0)
    }
}
