//! One error type for the whole memory plane. Every fallible operation
//! validates before it mutates, so an `Err` always means "nothing changed".

use crate::types::NodeId;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Malformed caller input (empty text, NaN in a vector, bad label, ...).
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// An embedding whose length differs from the memory's dimension.
    #[error("embedding has dimension {got}, this memory expects {expected}")]
    DimensionMismatch { expected: usize, got: usize },
    /// A controller score that is NaN, infinite or outside [0, 1].
    #[error("{what} must be a finite number in [0, 1], got {value}")]
    InvalidScore { what: String, value: f64 },
    /// A configuration or limit that makes no sense (zero beam, negative budget, ...).
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// A node id that does not exist (never existed, or was removed).
    #[error("no node with id {0}")]
    NodeNotFound(NodeId),
    /// A call that does not fit the traversal's current phase.
    #[error("traversal: {0}")]
    InvalidState(String),
    /// A snapshot that is truncated, corrupted or of an unknown format version.
    #[error("snapshot: {0}")]
    Snapshot(String),
    /// A failure inside the vector index library.
    #[error("vector index: {0}")]
    Index(String),
    /// A durable memory's write or fsync failed (it is read-only from then
    /// on), or its directory is locked by another handle.
    #[error("durability: {0}")]
    Durability(String),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
}

impl Error {
    pub(crate) fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidInput(msg.into())
    }
    pub(crate) fn config(msg: impl Into<String>) -> Self {
        Error::InvalidConfig(msg.into())
    }
}

/// Check that a controller or edge score is a finite number in [0, 1].
/// `what` is written out only for a bad value: pass `format_args!` where
/// the name is built, so a round that checks every candidate formats nothing.
pub fn check_unit(what: impl std::fmt::Display, value: f32) -> Result<()> {
    if value.is_finite() && (0.0..=1.0).contains(&value) {
        Ok(())
    } else {
        Err(Error::InvalidScore {
            what: what.to_string(),
            value: value as f64,
        })
    }
}
