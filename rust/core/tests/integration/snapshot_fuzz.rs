//! The snapshot reader against hostile bytes: arbitrary input, bit flips,
//! truncations and length-field edits, each resealed with a correct header
//! and checksum so the decoder itself (not just the CRC) is exercised.
//! Every outcome must be `Ok` or `Error::Snapshot`, never a panic or an
//! abort, and the heap the decode takes must stay within a bound linear in
//! the input's size. A counting global allocator measures that heap; it
//! counts per thread, so tests running beside a measured decode (this
//! binary's other modules too) are not counted in it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use jevmem_core::bm25::LexicalSnapshot;
use jevmem_core::derived::{DerivedFacts, DerivedSnapshot, TimeRef};
use jevmem_core::facts::FactsSnapshot;
use jevmem_core::marks::MarksSnapshot;
use jevmem_core::ops::NewNode;
use jevmem_core::passages::{NewPassage, Span};
use jevmem_core::snapshot::{LoadOptions, FORMAT_VERSION};
use jevmem_core::store::{MemoryStore, StoreConfig};
use jevmem_core::{Edge, EdgeOrigin, Error, Node, NodeId, View};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

struct Counting;

thread_local! {
    /// This thread's live heap bytes since it last started measuring (a
    /// free of an older block can take it below zero) and the peak since.
    static CURRENT: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn count(delta: isize) {
    // `try_with`: a thread's own exit frees memory after its locals are gone
    let _ = CURRENT.try_with(|c| {
        let now = c.get() + delta;
        c.set(now);
        let _ = PEAK.try_with(|p| p.set(p.get().max(now)));
    });
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        count(-(layout.size() as isize));
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count(new_size as isize - layout.size() as isize);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Run `f` on this thread and return what it returned and the most heap it
/// held at once, in bytes.
fn measured<T>(f: impl FnOnce() -> T) -> (T, usize) {
    CURRENT.with(|c| c.set(0));
    PEAK.with(|p| p.set(0));
    let out = f();
    (out, PEAK.with(|p| p.get()).max(0) as usize)
}

/// What a decode of `len` input bytes may take from the heap at its peak: the
/// absent-id allowance (32 MiB floor, 64 bytes per input byte) plus indexes
/// proportional to the input, with headroom for fixed-size structures.
fn heap_bound(len: usize) -> usize {
    (40 << 20) + 160 * len
}

/// Decode `bytes`, asserting the outcome is `Ok` or `Error::Snapshot` and
/// the heap (Rust's, and usearch's as the store reports it) stays bounded.
fn check_decode(bytes: &[u8]) -> std::result::Result<Option<MemoryStore>, TestCaseError> {
    let (result, taken) = measured(|| MemoryStore::from_snapshot_bytes(bytes));
    prop_assert!(
        taken <= heap_bound(bytes.len()),
        "decoding {} bytes took {taken} heap bytes (bound {})",
        bytes.len(),
        heap_bound(bytes.len())
    );
    match result {
        Ok(store) => {
            let stats = store.stats();
            let index_bytes = stats.vector_bytes + stats.passage_bytes;
            prop_assert!(
                index_bytes <= heap_bound(bytes.len()),
                "vector indexes hold {index_bytes} bytes after decoding {} bytes",
                bytes.len()
            );
            Ok(Some(store))
        }
        Err(Error::Snapshot(_)) => Ok(None),
        Err(other) => Err(TestCaseError::fail(format!(
            "a bad snapshot gave a non-snapshot error: {other:?}"
        ))),
    }
}

/// The version 7 body, mirrored from public types (postcard encodes a
/// struct as its fields in order, so this is byte-compatible).
#[derive(Clone, Serialize, Deserialize)]
struct Body {
    config: StoreConfig,
    next_id: NodeId,
    ops_applied: u64,
    nodes: Vec<Node>,
    #[serde(with = "le_floats")]
    embeddings: Vec<f32>,
    edges: Vec<Edge>,
    passages: Vec<Passages>,
    facts: FactsSnapshot,
    derived: DerivedSnapshot,
    lexical: Option<LexicalSnapshot>,
    marks: Option<MarksSnapshot>,
}

#[derive(Clone, Serialize, Deserialize)]
struct Passages(NodeId, Vec<Span>, #[serde(with = "le_floats")] Vec<f32>);

/// A float block as the format writes it: its little-endian bytes behind
/// one length (postcard's `Vec<u8>` has that layout).
mod le_floats {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(v: &[f32], s: S) -> Result<S::Ok, S::Error> {
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        bytes.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f32>, D::Error> {
        let bytes = Vec::<u8>::deserialize(d)?;
        Ok(bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }
}

/// A header with a correct length and checksum around `payload`.
fn seal(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(24 + payload.len());
    out.extend_from_slice(b"JEVMEMSS");
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

fn encode(body: &Body) -> Vec<u8> {
    seal(&postcard::to_stdvec(body).unwrap())
}

/// A small memory with every part a snapshot holds: nodes with timestamps,
/// provenance and entities, a removed node, passages, edges, facts.
fn sample() -> MemoryStore {
    let mut s = MemoryStore::new(StoreConfig::new(4)).unwrap();
    for i in 0..6u64 {
        let mut n = NewNode::new(
            format!("observation number {i} about the garden"),
            vec![1.0, i as f32, 0.5, -1.0],
        );
        n.timestamp = Some(1_700_000_000 + i as i64);
        n.entities = vec![format!("e{}", i % 2)];
        n.provenance = vec![("speaker".into(), format!("s{i}"))];
        if i == 5 {
            n.passages = vec![
                NewPassage::new(0, 11, vec![1.0, 0.0, 0.0, 0.0]),
                NewPassage::new(12, 30, vec![0.0, 0.0, 1.0, 0.0]),
            ];
        }
        s.add_node(n).unwrap();
    }
    s.remove_node(2).unwrap();
    s.upsert_edge(Edge {
        src: 0,
        dst: 1,
        view: View::Semantic,
        weight: 0.7,
        origin: EdgeOrigin::Rule,
        temporal: None,
    })
    .unwrap();
    s.add_supersedes(jevmem_core::facts::Supersedes {
        new: 4,
        old: 3,
        weight: 0.9,
        origin: EdgeOrigin::Controller,
    })
    .unwrap();
    s.set_valid_from(1, Some(1_600_000_000)).unwrap();
    let when = TimeRef {
        text: "last spring".into(),
        start: 1_680_000_000,
        end: 1_688_000_000,
        precision: 6,
        relative: true,
        span: (0, 11),
        anchor_precision: None,
    };
    let facts = [
        (0, 0.0, vec![when]),
        (3, 1.0, Vec::new()),
        (5, 0.5, Vec::new()),
    ]
    .into_iter()
    .map(|(id, question_share, time_refs)| DerivedFacts {
        id,
        question_share,
        time_refs,
    })
    .collect();
    s.set_derived(1, facts).unwrap();
    s
}

fn sample_bytes() -> Vec<u8> {
    sample().to_snapshot_bytes().unwrap()
}

fn sample_body() -> Body {
    let bytes = sample_bytes();
    postcard::from_bytes(&bytes[24..]).expect("the mirror matches the format")
}

#[test]
fn the_mirror_and_the_sample_round_trip() {
    let bytes = sample_bytes();
    assert_eq!(encode(&sample_body()), bytes);
    let loaded = check_decode(&bytes).unwrap().expect("the sample loads");
    assert_eq!(loaded.to_snapshot_bytes().unwrap(), bytes);
}

/// A body without the lexical content (what older writers left out) loads
/// by tokenizing the texts: the same memory, byte for byte.
#[test]
fn a_body_without_lexical_content_tokenizes_the_texts() {
    let bytes = sample_bytes();
    let mut body = sample_body();
    assert!(body
        .lexical
        .as_ref()
        .is_some_and(|l| !l.vocabulary.is_empty()));
    body.lexical = None;
    body.marks = None;
    let loaded = MemoryStore::from_snapshot_bytes(&encode(&body)).unwrap();
    assert_eq!(loaded.to_snapshot_bytes().unwrap(), bytes);
}

/// A body without sentence marks (what version 5 writers left out) makes
/// them from the texts: the same memory, byte for byte.
#[test]
fn a_body_without_marks_makes_them_from_the_texts() {
    let bytes = sample_bytes();
    let mut body = sample_body();
    assert!(body
        .marks
        .as_ref()
        .is_some_and(|m| m.nodes.iter().flatten().count() == 5));
    body.marks = None;
    let loaded = MemoryStore::from_snapshot_bytes(&encode(&body)).unwrap();
    assert_eq!(loaded.to_snapshot_bytes().unwrap(), bytes);
}

/// Marks that do not fit their nodes' lexical entries, or come without
/// them, are refused as a snapshot error.
#[test]
fn inconsistent_marks_are_a_snapshot_error() {
    type Damage = fn(&mut Body);
    let marks = |b: &mut Body| b.marks.as_mut().unwrap().nodes[0].as_mut().unwrap().clone();
    let cases: [(&str, Damage); 8] = [
        ("a piece past the last sentence", |b| {
            let m = b.marks.as_mut().unwrap().nodes[0].as_mut().unwrap();
            m.whole = false;
            m.pieces.push((m.sentences.len() as u32, "x".into()));
        }),
        ("a piece in a whole text", |b| {
            let m = b.marks.as_mut().unwrap().nodes[0].as_mut().unwrap();
            m.pieces.push((0, "x".into()));
        }),
        ("marks without lexical content", |b| b.lexical = None),
        ("one node short", |b| {
            b.marks.as_mut().unwrap().nodes.pop();
        }),
        ("a position past the node's terms", |b| {
            let n = b.lexical.as_ref().unwrap().docs[0].terms.len() as u32;
            let m = b.marks.as_mut().unwrap().nodes[0].as_mut().unwrap();
            *m.terms.last_mut().unwrap() = n;
        }),
        ("positions out of order", |b| {
            let m = b.marks.as_mut().unwrap().nodes[0].as_mut().unwrap();
            m.terms.reverse();
        }),
        ("an unknown mark", |b| {
            let m = b.marks.as_mut().unwrap().nodes[0].as_mut().unwrap();
            m.sentences[0].1 = 0x80;
        }),
        ("a sentence ending past the terms", |b| {
            let m = b.marks.as_mut().unwrap().nodes[0].as_mut().unwrap();
            m.sentences.last_mut().unwrap().0 += 1;
        }),
    ];
    assert!(marks(&mut sample_body()).terms.len() > 1);
    for (what, damage) in cases {
        let mut body = sample_body();
        damage(&mut body);
        match MemoryStore::from_snapshot_bytes(&encode(&body)) {
            Err(Error::Snapshot(_)) => {}
            other => panic!("{what}: {:?}", other.map(|_| "loaded")),
        }
    }
}

/// Lexical content that contradicts itself is refused as a snapshot error.
#[test]
fn inconsistent_lexical_content_is_a_snapshot_error() {
    type Damage = fn(&mut LexicalSnapshot);
    let cases: [(&str, Damage); 7] = [
        ("a length the counts do not sum to", |l| l.docs[0].len += 1),
        ("a position past the vocabulary", |l| {
            l.docs[0].terms[0].0 = l.vocabulary.len() as u32
        }),
        ("positions out of order", |l| l.docs[0].terms.reverse()),
        ("a zero count", |l| {
            l.docs[0].len -= l.docs[0].terms[0].1;
            l.docs[0].terms[0].1 = 0;
        }),
        ("a term no document uses", |l| {
            l.vocabulary.push("zzz".into())
        }),
        ("a term listed twice", |l| {
            let first = l.vocabulary[0].clone();
            let last = l.vocabulary.len() - 1;
            l.vocabulary[last] = first;
        }),
        ("a document short", |l| {
            l.docs.pop();
        }),
    ];
    for (what, damage) in cases {
        let mut body = sample_body();
        damage(body.lexical.as_mut().unwrap());
        match MemoryStore::from_snapshot_bytes(&encode(&body)) {
            Err(Error::Snapshot(_)) => {}
            other => panic!("{what}: {:?}", other.map(|_| "loaded")),
        }
    }
}

/// The cases the issue found: a valid checksum around a huge id space or a
/// huge dimension. Before the bounds, 2^20 took ~700 MB and 2^26 aborted.
#[test]
fn crafted_id_spaces_and_configs_are_refused_cheaply() {
    for next_id in [1 << 20, 1 << 26, 1 << 40, u64::MAX] {
        let mut body = sample_body();
        body.next_id = next_id;
        assert!(check_decode(&encode(&body)).unwrap().is_none(), "{next_id}");
        // a node id far out, under an equally far next_id
        let mut body = sample_body();
        body.next_id = next_id;
        body.nodes.last_mut().unwrap().id = next_id - 1;
        body.passages.clear();
        assert!(check_decode(&encode(&body)).unwrap().is_none(), "{next_id}");
    }
    // a gap the allowance covers still loads, ids intact
    let mut body = sample_body();
    body.next_id = 50_000;
    let store = check_decode(&encode(&body))
        .unwrap()
        .expect("a modest gap loads");
    assert_eq!(store.next_id(), 50_000);

    // a caller that trusts the file raises the bound, and only then it loads
    let mut body = sample_body();
    body.next_id = 1 << 20;
    let bytes = encode(&body);
    let refused = MemoryStore::from_snapshot_bytes(&bytes)
        .err()
        .expect("refused");
    assert!(
        refused.to_string().contains("max_absent_ids="),
        "the error names the knob: {refused}"
    );
    let trusted = LoadOptions {
        max_absent_ids: Some(1 << 20),
        ..LoadOptions::default()
    };
    let store = MemoryStore::from_snapshot_bytes_with(&bytes, trusted).expect("trusted load");
    assert_eq!(store.next_id(), 1 << 20);
    let too_few = LoadOptions {
        max_absent_ids: Some((1 << 20) - 100),
        ..LoadOptions::default()
    };
    assert!(MemoryStore::from_snapshot_bytes_with(&bytes, too_few).is_err());
    drop(store);

    let mut body = sample_body();
    body.config.vector.dim = 1 << 40;
    assert!(check_decode(&encode(&body)).unwrap().is_none());
    for (connectivity, expansion) in [(1 << 40, 128), (0, 128), (16, 1 << 40), (16, 0)] {
        let mut body = sample_body();
        body.config.vector.connectivity = connectivity;
        body.config.vector.expansion_add = expansion;
        assert!(check_decode(&encode(&body)).unwrap().is_none());
    }
    let mut body = sample_body();
    body.config.candidates.pool = 1 << 40;
    assert!(check_decode(&encode(&body)).unwrap().is_none());

    // The widest allowed dimension with the HNSW graph built at once: an
    // empty graph must not reserve a thousand wide rows.
    let mut body = sample_body();
    body.config.vector.dim = 1 << 16;
    body.config.vector.exact_threshold = 0;
    body.nodes.clear();
    body.embeddings.clear();
    body.edges.clear();
    body.passages.clear();
    body.facts = FactsSnapshot::default();
    body.derived = DerivedSnapshot::default();
    body.lexical = Some(LexicalSnapshot::default());
    body.marks = Some(MarksSnapshot::default());
    let store = check_decode(&encode(&body)).unwrap().expect("valid, empty");
    assert!(store.vectors().uses_hnsw());
}

#[test]
fn edges_and_facts_on_absent_nodes_are_snapshot_errors() {
    let mut body = sample_body();
    body.edges[0].dst = 2; // the removed node
    assert!(check_decode(&encode(&body)).unwrap().is_none());
    let mut body = sample_body();
    body.facts.valid_from.push((99, 0));
    assert!(check_decode(&encode(&body)).unwrap().is_none());
    let mut body = sample_body();
    body.embeddings[0] = f32::NAN;
    assert!(check_decode(&encode(&body)).unwrap().is_none());
    // derived facts of an absent node, a share out of range, an unknown precision
    let mut body = sample_body();
    body.derived.nodes[1].id = 2;
    assert!(check_decode(&encode(&body)).unwrap().is_none());
    let mut body = sample_body();
    body.derived.nodes[1].question_share = f64::NAN;
    assert!(check_decode(&encode(&body)).unwrap().is_none());
    let mut body = sample_body();
    body.derived.nodes[0].time_refs[0].precision = 200;
    assert!(check_decode(&encode(&body)).unwrap().is_none());
}

/// A postcard varint of `v`.
fn varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

#[derive(Clone, Debug)]
enum Mutation {
    /// Flip one bit of the payload.
    Flip { at: usize, bit: u8 },
    /// Cut the payload short.
    Truncate { keep: usize },
    /// Overwrite the varint that starts at a byte with a large value (a
    /// length or count field when it lands on one).
    Varint { at: usize, value: u64 },
    /// Insert raw bytes.
    Insert { at: usize, bytes: Vec<u8> },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Mutation::Flip { at, bit }),
        any::<usize>().prop_map(|keep| Mutation::Truncate { keep }),
        (
            any::<usize>(),
            prop_oneof![
                Just(u64::MAX),
                Just(1u64 << 32),
                Just(1u64 << 26),
                Just(1u64 << 20),
                0u64..1 << 16,
            ]
        )
            .prop_map(|(at, value)| Mutation::Varint { at, value }),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..12))
            .prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
    ]
}

fn apply(payload: &mut Vec<u8>, m: &Mutation) {
    let n = payload.len();
    match m {
        Mutation::Flip { at, bit } => payload[at % n] ^= 1 << bit,
        Mutation::Truncate { keep } => payload.truncate(keep % n),
        Mutation::Varint { at, value } => {
            let at = at % n;
            // the old varint ends at the first byte without the high bit
            let end = payload[at..]
                .iter()
                .position(|b| b & 0x80 == 0)
                .map_or(n, |p| at + p + 1);
            payload.splice(at..end, varint(*value));
        }
        Mutation::Insert { at, bytes } => {
            let at = at % (n + 1);
            payload.splice(at..at, bytes.iter().copied());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn mutated_snapshots_fail_cleanly_and_cheaply(
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let sealed = sample_bytes();
        let mut payload = sealed[24..].to_vec();
        for m in &mutations {
            if payload.is_empty() {
                break;
            }
            apply(&mut payload, m);
        }
        check_decode(&seal(&payload))?;
    }

    #[test]
    fn arbitrary_bytes_fail_cleanly(
        payload in prop::collection::vec(any::<u8>(), 0..2048),
        sealed in any::<bool>(),
    ) {
        let bytes = if sealed { seal(&payload) } else { payload };
        check_decode(&bytes)?;
    }

    #[test]
    fn damaged_headers_are_refused(
        at in 0usize..24,
        bit in 0u8..8,
        keep in 0usize..24,
    ) {
        let mut bytes = sample_bytes();
        bytes[at] ^= 1 << bit;
        prop_assert!(check_decode(&bytes)?.is_none());
        let bytes = sample_bytes();
        prop_assert!(check_decode(&bytes[..keep])?.is_none());
    }
}

/// The write-ahead log's readers under the same counting allocator: a
/// record's counts and lengths (op count, state delta length, a vector's
/// element count inside an op) are read from the input, and what decoding
/// allocates must stay linear in the input, whatever they claim.
fn check_log_decode(bytes: &[u8]) -> std::result::Result<(), TestCaseError> {
    use jevmem_core::durable::wal;
    let ((), taken) = measured(|| {
        let _ = wal::decode_payload(bytes);
        let mut segment = wal::segment_header(1).to_vec();
        segment.extend_from_slice(&wal::encode_record(1, bytes));
        segment.extend_from_slice(bytes);
        if let Ok(scan) = wal::scan_segment(&segment) {
            for (_, r) in scan.records {
                let _ = wal::decode_payload(&segment[r]);
            }
        }
    });
    // the segment copy is 3x the input; serde preallocates at most 1 MiB per sequence
    let bound = (2 << 20) + 16 * bytes.len();
    prop_assert!(
        taken <= bound,
        "decoding a {}-byte log record took {taken} heap bytes (bound {bound})",
        bytes.len()
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn log_records_decode_within_a_linear_heap(
        count in any::<u32>(),
        delta_len in any::<u32>(),
        body in proptest::collection::vec(any::<u8>(), 0..1024),
    ) {
        let mut payload = count.to_le_bytes().to_vec();
        payload.extend_from_slice(&delta_len.to_le_bytes());
        payload.extend_from_slice(&body);
        check_log_decode(&payload)?;
    }

    /// A real op whose vector length prefix claims up to 2^63 elements.
    #[test]
    fn an_op_claiming_a_huge_vector_stays_bounded(claim in 1u64..(1 << 63), keep in 0usize..64) {
        use jevmem_core::ops::Op;
        let op = Op::AddNode { id: 0, node: NewNode::new("x", vec![1.0; 4]) };
        let encoded = postcard::to_stdvec(&op).unwrap();
        // find the embedding's length prefix (a varint 4) followed by 16 bytes of floats
        let floats: Vec<u8> = [1.0f32; 4].iter().flat_map(|f| f.to_le_bytes()).collect();
        let at = encoded.windows(17).position(|w| w[0] == 4 && w[1..] == floats[..]).unwrap();
        let mut varint = Vec::new();
        let mut v = claim;
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 { varint.push(b); break; }
            varint.push(b | 0x80);
        }
        let mut bytes = encoded[..at].to_vec();
        bytes.extend_from_slice(&varint);
        bytes.extend_from_slice(&encoded[at + 1..(at + 1 + keep).min(encoded.len())]);
        let payload = jevmem_core::durable::wal::encode_payload(1, &bytes, b"");
        check_log_decode(&payload)?;
    }
}
