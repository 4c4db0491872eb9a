//! The extension module `noftl._native` (built by maturin with the `python` feature): each
//! function takes the experiment's keywords, checks them (bad input: `ValueError` with the
//! lab's message, before any work), runs the experiment with Python's lock released (other
//! Python threads go on; the run cannot be interrupted by Ctrl-C until it ends) and returns
//! the JSON documents the CLI writes. `python/noftl/__init__.py` parses them into dicts.

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::Value;

use crate::args::Kwargs;
use crate::runs::{self, Failure, Ready};

/// A Python keyword value as JSON: None, bool, int, float, str and lists of them.
fn value(key: &str, v: &Bound<'_, PyAny>) -> PyResult<Value> {
    if v.is_none() {
        return Ok(Value::Null);
    }
    // bool before int: Python's bool is an int.
    if v.is_instance_of::<PyBool>() {
        return Ok(Value::Bool(v.extract()?));
    }
    if v.is_instance_of::<PyInt>() {
        return match v.extract::<u64>() {
            Ok(n) => Ok(Value::from(n)),
            Err(_) => Err(PyValueError::new_err(format!(
                "{key} takes a whole number of at least 0, not {v}"
            ))),
        };
    }
    if v.is_instance_of::<PyFloat>() {
        let x: f64 = v.extract()?;
        return serde_json::Number::from_f64(x)
            .map(Value::Number)
            .ok_or_else(|| PyValueError::new_err(format!("{key} takes a finite number, not {x}")));
    }
    if v.is_instance_of::<PyString>() {
        return Ok(Value::String(v.extract()?));
    }
    if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        let items: Vec<Bound<'_, PyAny>> = v.try_iter()?.collect::<PyResult<_>>()?;
        return items
            .iter()
            .map(|x| value(key, x))
            .collect::<PyResult<Vec<_>>>()
            .map(Value::Array);
    }
    Err(PyValueError::new_err(format!(
        "{key} takes a number, a string, True/False or a list, not a {}",
        v.get_type().name()?
    )))
}

fn kwargs_of(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Kwargs> {
    let mut out = Vec::new();
    if let Some(d) = kwargs {
        for (k, v) in d.iter() {
            let key: String = k.extract()?;
            let val = value(&key, &v)?;
            out.push((key, val));
        }
    }
    Ok(out)
}

fn to_py(f: Failure) -> PyErr {
    match f {
        Failure::BadInput(m) => PyValueError::new_err(m),
        Failure::Run(m) => PyRuntimeError::new_err(m),
    }
}

/// Checks with the lock held, runs without it.
fn call(
    py: Python<'_>,
    kwargs: Option<&Bound<'_, PyDict>>,
    prepare: fn(&Kwargs) -> Result<Ready, Failure>,
) -> PyResult<Vec<String>> {
    let ready = prepare(&kwargs_of(kwargs)?).map_err(to_py)?;
    py.detach(ready).map_err(to_py)
}

/// The comparison of stores (NoFTL Fig. 3): one JSON document per scale.
#[pyfunction]
#[pyo3(name = "compare", signature = (**kwargs))]
fn run_compare(py: Python<'_>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Vec<String>> {
    call(py, kwargs, runs::compare)
}

/// A TPC-B or TATP bench run: one JSON document.
#[pyfunction]
#[pyo3(name = "bench", signature = (**kwargs))]
fn run_bench(py: Python<'_>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Vec<String>> {
    call(py, kwargs, runs::bench)
}

/// A fio-like workload on the raw flash or behind an FTL: one JSON document.
#[pyfunction]
#[pyo3(name = "io", signature = (**kwargs))]
fn run_io(py: Python<'_>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Vec<String>> {
    call(py, kwargs, runs::io)
}

/// The crash test: one JSON document.
#[pyfunction]
#[pyo3(name = "crashtest", signature = (**kwargs))]
fn run_crashtest(py: Python<'_>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Vec<String>> {
    call(py, kwargs, runs::crashtest)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run_compare, m)?)?;
    m.add_function(wrap_pyfunction!(run_bench, m)?)?;
    m.add_function(wrap_pyfunction!(run_io, m)?)?;
    m.add_function(wrap_pyfunction!(run_crashtest, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
