//! jevmem-core: the memory plane of jevmem, free of Python.
//!
//! Canonical nodes in a multi-view graph, BM25 and vector indexes, reciprocal
//! rank fusion, largest-remainder budgets, write-path candidate discovery and
//! a bounded, resumable beam traversal. The Python bindings live in `rust/py`.

pub mod bm25;
pub mod budget;
pub mod calendar;
pub mod candidates;
pub mod context;
pub mod coverage;
pub mod cues;
pub mod derived;
mod distance;
pub mod durable;
pub mod entities;
pub mod episode;
pub mod error;
pub mod facts;
pub mod failpoint;
pub mod filter;
pub mod fusion;
pub mod graph;
pub mod grounding;
pub mod hashing;
pub mod idbits;
pub mod marks;
pub mod ops;
pub mod pair_signals;
pub mod passages;
pub mod patterns;
mod prefetch;
pub mod query_plan;
pub mod read;
pub mod related;
pub mod signals;
pub mod snapshot;
pub mod spelling;
pub mod store;
pub mod style;
pub mod text;
pub mod timeline;
pub mod traversal;
pub mod types;
pub mod validity;
pub mod vector;
pub mod writing;

pub use error::{Error, Result};
pub use filter::{Allowed, Field, Filter, Selection};
pub use types::{
    Edge, EdgeOrigin, MetaValue, Node, NodeId, TemporalLabel, Timestamp, TypeScores, View,
};
