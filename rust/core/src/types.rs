//! Plain data shared by every part of the memory plane.

use serde::{Deserialize, Serialize};

use crate::error::{check_unit, Error, Result};

/// Node ids are the insertion sequence: allocated in increasing order, never reused.
pub type NodeId = u64;

/// Unix time in whole seconds.
pub type Timestamp = i64;

/// The earliest observation time a node may have: 0003-01-01T00:00:00Z
/// (time grounding resolves dates up to a year around a node's time, within
/// the calendar of years 1 to 9999).
pub const MIN_TIMESTAMP: Timestamp = -62_072_524_800;
/// The latest: 9997-12-31T23:59:59Z.
pub const MAX_TIMESTAMP: Timestamp = 253_339_228_799;

/// Refuse a time outside `MIN_TIMESTAMP..=MAX_TIMESTAMP`: a node observed
/// then could be stored, but no memory could read it back.
pub fn check_timestamp(ts: Timestamp, what: &str) -> Result<()> {
    if (MIN_TIMESTAMP..=MAX_TIMESTAMP).contains(&ts) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{what} {ts} is outside years 3 to 9997 UTC ({MIN_TIMESTAMP} to {MAX_TIMESTAMP})"
        )))
    }
}

pub const SECONDS_PER_DAY: f64 = 86_400.0;

/// The four relational views. All of them share the same canonical nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum View {
    Semantic = 0,
    Temporal = 1,
    Causal = 2,
    Entity = 3,
}

impl View {
    pub const ALL: [View; 4] = [View::Semantic, View::Temporal, View::Causal, View::Entity];
    pub const COUNT: usize = 4;

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn from_index(i: usize) -> Option<View> {
        View::ALL.get(i).copied()
    }

    pub fn name(self) -> &'static str {
        match self {
            View::Semantic => "semantic",
            View::Temporal => "temporal",
            View::Causal => "causal",
            View::Entity => "entity",
        }
    }

    pub fn parse(s: &str) -> Result<View> {
        View::ALL
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unknown view {s:?}; expected one of semantic, temporal, causal, entity"
                ))
            })
    }
}

/// Allen-style relation of an edge's source to its destination in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TemporalLabel {
    Before,
    After,
    During,
    Contains,
    Overlaps,
    SameTime,
    Unknown,
}

impl TemporalLabel {
    pub const ALL: [TemporalLabel; 7] = [
        TemporalLabel::Before,
        TemporalLabel::After,
        TemporalLabel::During,
        TemporalLabel::Contains,
        TemporalLabel::Overlaps,
        TemporalLabel::SameTime,
        TemporalLabel::Unknown,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TemporalLabel::Before => "before",
            TemporalLabel::After => "after",
            TemporalLabel::During => "during",
            TemporalLabel::Contains => "contains",
            TemporalLabel::Overlaps => "overlaps",
            TemporalLabel::SameTime => "same_time",
            TemporalLabel::Unknown => "unknown",
        }
    }

    pub fn parse(s: &str) -> Result<TemporalLabel> {
        TemporalLabel::ALL
            .into_iter()
            .find(|l| l.name() == s)
            .ok_or_else(|| Error::invalid(format!("unknown temporal label {s:?}")))
    }
}

/// Who decided an edge: a deterministic rule (timestamps, exact entity ids) or the controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EdgeOrigin {
    Rule,
    Controller,
}

impl EdgeOrigin {
    pub fn name(self) -> &'static str {
        match self {
            EdgeOrigin::Rule => "rule",
            EdgeOrigin::Controller => "controller",
        }
    }
    pub fn parse(s: &str) -> Result<EdgeOrigin> {
        match s {
            "rule" => Ok(EdgeOrigin::Rule),
            "controller" => Ok(EdgeOrigin::Controller),
            _ => Err(Error::invalid(format!(
                "unknown edge origin {s:?}; expected rule or controller"
            ))),
        }
    }
}

/// Memory-type scores, each in [0, 1] and not mutually exclusive.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TypeScores {
    pub episodic: f32,
    pub semantic: f32,
    pub procedural: f32,
    pub preference: f32,
}

impl TypeScores {
    pub fn validate(&self) -> Result<()> {
        check_unit("type score episodic", self.episodic)?;
        check_unit("type score semantic", self.semantic)?;
        check_unit("type score procedural", self.procedural)?;
        check_unit("type score preference", self.preference)
    }
}

/// A canonical memory node. Its embedding lives in the vector index.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub id: NodeId,
    pub content: String,
    pub timestamp: Option<Timestamp>,
    /// Free key/value provenance (source, session, turn id, speaker, ...), in insertion order.
    pub provenance: Vec<(String, String)>,
    /// Normalised entity identifiers.
    pub entities: Vec<String>,
    pub types: TypeScores,
    /// Who or what the node belongs to (user, agent, session, ...): key/value
    /// pairs sorted by key, one value per key; empty = global (see `filter`).
    pub scope: Vec<(String, String)>,
    /// Caller metadata, sorted by key, one value per key.
    pub metadata: Vec<(String, MetaValue)>,
    /// The client's idempotency key: a second write with it is a no-op.
    pub key: Option<String>,
}

impl Node {
    /// The scope value of `key`, if the node has one.
    pub fn scope_value(&self, key: &str) -> Option<&str> {
        self.scope
            .binary_search_by(|(k, _)| k.as_str().cmp(key))
            .ok()
            .map(|i| self.scope[i].1.as_str())
    }

    /// The metadata value of `key`, if the node has one.
    pub fn meta(&self, key: &str) -> Option<&MetaValue> {
        self.metadata
            .binary_search_by(|(k, _)| k.as_str().cmp(key))
            .ok()
            .map(|i| &self.metadata[i].1)
    }
}

/// A metadata value. Integers and floats compare as numbers with each other
/// (1 == 1.0); strings and booleans only with their own kind.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum MetaValue {
    Str(String),
    Int(i64),
    /// Always finite (validated on the way in).
    Float(f64),
    Bool(bool),
}

/// A typed edge. Causal edges point cause -> effect.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Edge {
    pub src: NodeId,
    pub dst: NodeId,
    pub view: View,
    pub weight: f32,
    pub origin: EdgeOrigin,
    /// Only meaningful on temporal edges.
    pub temporal: Option<TemporalLabel>,
}

impl Edge {
    pub fn validate(&self) -> Result<()> {
        if self.src == self.dst {
            return Err(Error::invalid(format!("self-loop on node {}", self.src)));
        }
        check_unit("edge weight", self.weight)?;
        if self.temporal.is_some() && self.view != View::Temporal {
            return Err(Error::invalid(
                "a temporal label is only allowed on temporal edges",
            ));
        }
        Ok(())
    }
}
