//! The durable directory: log, checkpoints, recovery, failures.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use jevmem_core::durable::{wal, Durable, DurableOptions, Opened, SyncMode};
use jevmem_core::failpoint::{self, Action};
use jevmem_core::ops::{NewNode, Op};
use jevmem_core::store::{MemoryStore, StoreConfig};
use jevmem_core::{Edge, EdgeOrigin, Error, View};
use proptest::prelude::*;

/// Failpoints are process-wide: tests here run one at a time.
fn serial() -> MutexGuard<'static, ()> {
    static M: Mutex<()> = Mutex::new(());
    M.lock().unwrap_or_else(|e| e.into_inner())
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "jevmem-durable-{tag}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const DIM: usize = 4;

fn open(dir: &Path, opts: DurableOptions) -> jevmem_core::Result<Opened> {
    let mut o = Durable::open(dir, StoreConfig::new(DIM), "test-embedder", b"init", opts)?;
    o.store.set_journaling(true);
    Ok(o)
}

fn opts() -> DurableOptions {
    DurableOptions::default()
}

fn node(i: u64) -> NewNode {
    let mut n = NewNode::new(
        format!("observation {i} about topic {}", i % 3),
        vec![1.0, i as f32, 0.5, -(i as f32)],
    );
    n.timestamp = Some(1_700_000_000 + i as i64);
    n
}

/// One request: a node, and an edge to the previous one.
fn write(o: &mut Opened, i: u64) -> u64 {
    let id = o.store.add_node(node(i)).unwrap();
    if id > 0 && o.store.get(id - 1).is_some() {
        o.store
            .upsert_edge(Edge {
                src: id - 1,
                dst: id,
                view: View::Temporal,
                weight: 0.5,
                origin: EdgeOrigin::Rule,
                temporal: None,
            })
            .unwrap();
    }
    let j = o.store.take_journal();
    let seq = o
        .durable
        .append(j.ops, &j.bytes, format!("d{i}").as_bytes())
        .unwrap();
    o.durable.wait(seq).unwrap();
    seq
}

fn state(store: &MemoryStore) -> Vec<u8> {
    store.to_snapshot_bytes().unwrap()
}

/// A reference store with the same requests applied, no durability.
fn reference(n: u64) -> MemoryStore {
    let dir = TempDir::new("ref");
    let mut o = open(&dir.0, opts()).unwrap();
    for i in 0..n {
        write(&mut o, i);
    }
    o.store
}

#[test]
fn writes_survive_reopen_and_checkpoints() {
    let _g = serial();
    let dir = TempDir::new("reopen");
    let mut o = open(&dir.0, opts()).unwrap();
    assert!(o.report.created);
    for i in 0..10 {
        assert_eq!(write(&mut o, i), i + 1);
    }
    let before = state(&o.store);
    drop(o);
    let mut o = open(&dir.0, opts()).unwrap();
    assert_eq!(o.report.replayed_records, 10);
    assert_eq!(o.state, b"init");
    assert_eq!(o.deltas.len(), 10);
    assert_eq!(o.deltas[3], b"d3");
    assert_eq!(state(&o.store), before);
    // a checkpoint covers the log: old segments go, reopening replays nothing
    let p = o.durable.prepare_checkpoint(&o.store, b"after-10").unwrap();
    let r = o.durable.finish_checkpoint(p).unwrap();
    assert_eq!(r.seq, 10);
    assert!(r.segments_removed >= 1);
    for i in 10..15 {
        write(&mut o, i);
    }
    let before = state(&o.store);
    drop(o);
    let o = open(&dir.0, opts()).unwrap();
    assert_eq!(o.report.checkpoint_seq, 10);
    assert_eq!(o.report.replayed_records, 5);
    assert_eq!(o.state, b"after-10");
    assert_eq!(state(&o.store), before);
    assert_eq!(state(&o.store), state(&reference(15)));
    assert_eq!(wal::list_segments(&dir.0).unwrap().len(), 1);
}

#[test]
fn the_directory_is_locked_and_names_its_embedder() {
    let _g = serial();
    let dir = TempDir::new("lock");
    let o = open(&dir.0, opts()).unwrap();
    assert!(matches!(open(&dir.0, opts()), Err(Error::Durability(_))));
    drop(o);
    let other = Durable::open(&dir.0, StoreConfig::new(DIM), "another", b"", opts());
    match other {
        Err(Error::InvalidConfig(msg)) => assert!(msg.contains("test-embedder"), "{msg}"),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("a memory opened with another embedder"),
    }
    let other = Durable::open(
        &dir.0,
        StoreConfig::new(DIM + 1),
        "test-embedder",
        b"",
        opts(),
    );
    assert!(matches!(other, Err(Error::InvalidConfig(_))));
}

#[test]
fn segments_roll_over_and_replay_across_them() {
    let _g = serial();
    let dir = TempDir::new("segments");
    let small = DurableOptions {
        segment_bytes: 4096,
        ..opts()
    };
    let mut o = open(&dir.0, small.clone()).unwrap();
    for i in 0..150 {
        write(&mut o, i);
    }
    let before = state(&o.store);
    drop(o);
    assert!(wal::list_segments(&dir.0).unwrap().len() > 2);
    let o = open(&dir.0, small).unwrap();
    assert_eq!(o.report.replayed_records, 150);
    assert_eq!(state(&o.store), before);
}

fn last_segment(dir: &Path) -> PathBuf {
    wal::list_segments(dir).unwrap().pop().unwrap().1
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn a_torn_tail_is_cut_at_every_byte_of_the_last_records() {
    let _g = serial();
    let dir = TempDir::new("torn");
    let mut o = open(&dir.0, opts()).unwrap();
    let mut states = vec![state(&o.store)];
    let mut ends = vec![std::fs::metadata(last_segment(&dir.0)).unwrap().len()];
    for i in 0..3 {
        write(&mut o, i);
        states.push(state(&o.store));
        ends.push(std::fs::metadata(last_segment(&dir.0)).unwrap().len());
    }
    drop(o);
    let seg = last_segment(&dir.0);
    let full = std::fs::read(&seg).unwrap();
    for cut in (ends[0] as usize)..full.len() {
        let copy = TempDir::new("torn-copy");
        copy_dir(&dir.0, &copy.0);
        let seg_copy = copy.0.join(seg.file_name().unwrap());
        std::fs::write(&seg_copy, &full[..cut]).unwrap();
        let mut o = open(&copy.0, opts()).unwrap();
        let whole = ends.iter().filter(|&&e| e as usize <= cut).count() - 1;
        assert_eq!(o.report.replayed_records, whole as u64, "cut at {cut}");
        assert_eq!(state(&o.store), states[whole], "cut at {cut}");
        assert_eq!(
            o.report.torn_tail_bytes,
            (cut as u64) - ends[whole],
            "cut at {cut}"
        );
        // writing goes on after the cut, and that survives too
        write(&mut o, 100);
        let after = state(&o.store);
        drop(o);
        let o = open(&copy.0, opts()).unwrap();
        assert_eq!(state(&o.store), after, "cut at {cut}");
    }
}

#[test]
fn a_corrupt_record_mid_log_refuses_to_open_unless_salvaged() {
    let _g = serial();
    let dir = TempDir::new("corrupt");
    let mut o = open(&dir.0, opts()).unwrap();
    let mut states = vec![state(&o.store)];
    let mut ends = vec![std::fs::metadata(last_segment(&dir.0)).unwrap().len()];
    for i in 0..5 {
        write(&mut o, i);
        states.push(state(&o.store));
        ends.push(std::fs::metadata(last_segment(&dir.0)).unwrap().len());
    }
    drop(o);
    let seg = last_segment(&dir.0);
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[ends[2] as usize + 20] ^= 0x01; // inside record 3
    std::fs::write(&seg, &bytes).unwrap();
    match open(&dir.0, opts()) {
        Err(Error::Snapshot(msg)) => assert!(msg.contains("salvage"), "{msg}"),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("opened a log with a bad record in the middle"),
    }
    let salvage = DurableOptions {
        salvage: true,
        ..opts()
    };
    let mut o = open(&dir.0, salvage).unwrap();
    assert_eq!(o.report.replayed_records, 2);
    assert_eq!(o.report.dropped_records, 2, "{:?}", o.report); // records 4 and 5 (3 is bad)
    assert!(o.report.dropped_bytes > 0);
    assert_eq!(state(&o.store), states[2]);
    write(&mut o, 50);
    let after = state(&o.store);
    drop(o);
    // the salvage was made durable: a plain open now works
    let o = open(&dir.0, opts()).unwrap();
    assert_eq!(state(&o.store), after);
    // and the dropped bytes were kept aside
    assert!(std::fs::read_dir(&dir.0).unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .starts_with("salvaged-")));
}

#[test]
fn a_failed_fsync_makes_the_memory_read_only() {
    let _g = serial();
    let dir = TempDir::new("eio");
    let mut o = open(&dir.0, opts()).unwrap();
    write(&mut o, 0);
    let durable_state = state(&o.store);
    failpoint::set("wal.fsync", Some(Action::Eio)).unwrap();
    o.store.add_node(node(1)).unwrap();
    let j = o.store.take_journal();
    let seq = o.durable.append(j.ops, &j.bytes, b"").unwrap();
    let err = o.durable.wait(seq).unwrap_err();
    failpoint::set("wal.fsync", None).unwrap();
    assert!(matches!(err, Error::Durability(_)), "{err}");
    assert!(err.to_string().contains("read-only"), "{err}");
    // never retried: later writes and checkpoints fail the same way
    assert!(matches!(
        o.durable.append(0, &[], b"x"),
        Err(Error::Durability(_))
    ));
    assert!(o.durable.prepare_checkpoint(&o.store, b"").is_err());
    drop(o);
    // reopening recovers what reached the OS: here the injected failure hit
    // only the fsync, so the unacknowledged record is there too
    let o = open(&dir.0, opts()).unwrap();
    assert_eq!(o.store.len(), 2);
    assert_ne!(state(&o.store), durable_state);
}

#[test]
fn every_checkpoint_failpoint_leaves_an_openable_memory() {
    let _g = serial();
    for point in [
        "checkpoint.write",
        "checkpoint.fsync",
        "checkpoint.rename",
        "manifest.write",
        "manifest.rename",
        "dir.fsync",
        "checkpoint.cleanup",
    ] {
        for action in [Action::Eio, Action::Enospc] {
            let dir = TempDir::new("ckfail");
            let mut o = open(&dir.0, opts()).unwrap();
            for i in 0..4 {
                write(&mut o, i);
            }
            let expect = state(&o.store);
            let p = o.durable.prepare_checkpoint(&o.store, b"new").unwrap();
            failpoint::set(point, Some(action)).unwrap();
            let r = o.durable.finish_checkpoint(p);
            failpoint::set(point, None).unwrap();
            if point != "checkpoint.cleanup" && point != "dir.fsync" {
                assert!(r.is_err(), "{point}: the checkpoint should have failed");
            }
            // still writable: a failed checkpoint loses nothing acknowledged
            write(&mut o, 9);
            let expect_after = state(&o.store);
            drop(o);
            let o = open(&dir.0, opts()).unwrap();
            assert_eq!(state(&o.store), expect_after, "{point} {action:?}");
            assert_ne!(expect, expect_after);
            // no temporary files are left behind
            let temps: Vec<_> = std::fs::read_dir(&dir.0)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains(".tmp-"))
                .collect();
            assert!(temps.is_empty(), "{point}: {temps:?}");
        }
    }
}

#[test]
fn concurrent_writers_share_fsyncs_and_lose_nothing() {
    let _g = serial();
    let dir = TempDir::new("group");
    let o = open(&dir.0, opts()).unwrap();
    let store = Mutex::new(o.store);
    let durable = o.durable;
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let (store, durable) = (&store, &durable);
            s.spawn(move || {
                for i in 0..25u64 {
                    let seq = {
                        let mut st = store.lock().unwrap();
                        st.add_node(node(t * 1000 + i)).unwrap();
                        let j = st.take_journal();
                        durable.append(j.ops, &j.bytes, &[]).unwrap()
                    };
                    durable.wait(seq).unwrap();
                }
            });
        }
    });
    let before = state(&store.lock().unwrap());
    drop(durable);
    let o = open(&dir.0, opts()).unwrap();
    assert_eq!(o.store.len(), 200);
    assert_eq!(o.report.replayed_records, 200);
    assert_eq!(state(&o.store), before);
}

#[test]
fn interval_and_none_modes_recover_after_a_clean_close() {
    let _g = serial();
    for mode in ["interval:5", "none"] {
        let dir = TempDir::new("modes");
        let m = DurableOptions {
            sync: SyncMode::parse(mode).unwrap(),
            ..opts()
        };
        let mut o = open(&dir.0, m.clone()).unwrap();
        for i in 0..20 {
            write(&mut o, i);
        }
        if mode.starts_with("interval") {
            std::thread::sleep(std::time::Duration::from_millis(30));
        }
        let before = state(&o.store);
        drop(o);
        let o = open(&dir.0, m).unwrap();
        assert_eq!(state(&o.store), before, "{mode}");
    }
    assert!(SyncMode::parse("interval:0").is_err());
    assert!(SyncMode::parse("sometimes").is_err());
}

#[test]
fn a_damaged_checkpoint_or_manifest_is_a_snapshot_error() {
    let _g = serial();
    let dir = TempDir::new("damaged");
    let mut o = open(&dir.0, opts()).unwrap();
    write(&mut o, 0);
    let p = o.durable.prepare_checkpoint(&o.store, b"s").unwrap();
    o.durable.finish_checkpoint(p).unwrap();
    drop(o);
    let manifest = o_manifest(&dir.0);
    let ck = dir.0.join(&manifest);
    let good = std::fs::read(&ck).unwrap();
    let mut bad = good.clone();
    bad[30] ^= 0xff;
    std::fs::write(&ck, &bad).unwrap();
    assert!(matches!(open(&dir.0, opts()), Err(Error::Snapshot(_))));
    std::fs::write(&ck, &good).unwrap();
    std::fs::write(dir.0.join("MANIFEST"), b"{\"format\": 1").unwrap();
    assert!(matches!(open(&dir.0, opts()), Err(Error::Snapshot(_))));
}

fn o_manifest(dir: &Path) -> String {
    let m: serde_json_value::Manifest =
        serde_json_value::parse(&std::fs::read_to_string(dir.join("MANIFEST")).unwrap());
    m.checkpoint
}

/// A tiny reader for the manifest's checkpoint name (the core's own type
/// is what is under test).
mod serde_json_value {
    pub struct Manifest {
        pub checkpoint: String,
    }
    pub fn parse(text: &str) -> Manifest {
        let at = text.find("\"checkpoint\"").unwrap();
        let rest = &text[at + 12..];
        let start = rest.find('"').unwrap() + 1;
        let end = start + rest[start..].find('"').unwrap();
        Manifest {
            checkpoint: rest[start..end].to_string(),
        }
    }
}

#[test]
fn journaled_batches_encode_like_single_ops() {
    let _g = serial();
    let mut a = MemoryStore::new(StoreConfig::new(DIM)).unwrap();
    let mut b = MemoryStore::new(StoreConfig::new(DIM)).unwrap();
    a.set_journaling(true);
    b.set_journaling(true);
    a.add_nodes(vec![node(0), node(1)]).unwrap();
    b.add_node(node(0)).unwrap();
    b.add_node(node(1)).unwrap();
    let (ja, jb) = (a.take_journal(), b.take_journal());
    assert_eq!(ja.ops, 2);
    assert_eq!(ja.bytes, jb.bytes);
    let entry = wal::decode_payload(&wal::encode_payload(ja.ops, &ja.bytes, b"")).unwrap();
    assert!(matches!(&entry.ops[1], Op::AddNode { id: 1, .. }));
    // a refused op leaves no trace in the journal
    assert!(a.remove_node(99).is_err());
    assert!(!a.journal_pending());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Arbitrary bytes as a log segment: no panic, and whatever is read is
    /// bounded by the input.
    #[test]
    fn segment_reader_never_panics(body in proptest::collection::vec(any::<u8>(), 0..512), first in any::<u64>()) {
        let mut bytes = wal::segment_header(first).to_vec();
        bytes.extend_from_slice(&body);
        let scan = wal::scan_segment(&bytes).unwrap();
        prop_assert!(scan.good_end <= bytes.len());
        for (_, r) in scan.records {
            let _ = wal::decode_payload(&bytes[r]);
        }
        let _ = wal::decode_payload(&body);
    }

    /// Valid records with random bit flips: no panic; every record read
    /// back is one that was written.
    #[test]
    fn flipped_bits_never_yield_a_record_that_was_not_written(flips in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..8), 1..4)) {
        let mut bytes = wal::segment_header(1).to_vec();
        let mut payloads = Vec::new();
        for i in 0..4u64 {
            let op = Op::AddNode { id: i, node: node(i) };
            let p = wal::encode_payload(1, &postcard::to_stdvec(&op).unwrap(), b"");
            bytes.extend_from_slice(&wal::encode_record(i + 1, &p));
            payloads.push(p);
        }
        for (at, bit) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= 1 << bit;
        }
        let scan = wal::scan_segment(&bytes).unwrap_or_else(|_| wal::scan_segment(&wal::segment_header(1)).unwrap());
        for (seq, r) in scan.records {
            prop_assert_eq!(&bytes[r], &payloads[(seq - 1) as usize][..]);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A checkpoint file with random damage (the MANIFEST's checksum updated
    /// to match, so the decoders themselves are exercised): opening fails
    /// with a typed error or succeeds, never panics.
    #[test]
    fn damaged_checkpoints_never_panic(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in proptest::option::of(any::<prop::sample::Index>()),
    ) {
        let _g = serial();
        let dir = TempDir::new("fuzz-ck");
        let mut o = open(&dir.0, opts()).unwrap();
        for i in 0..3 {
            write(&mut o, i);
        }
        let p = o.durable.prepare_checkpoint(&o.store, b"state").unwrap();
        o.durable.finish_checkpoint(p).unwrap();
        drop(o);
        let name = o_manifest(&dir.0);
        let ck = dir.0.join(&name);
        let mut bytes = std::fs::read(&ck).unwrap();
        // damage the header (lengths, version, sequence) more often than the body
        for (k, (at, v)) in flips.into_iter().enumerate() {
            let span = if k % 2 == 0 { 40 } else { bytes.len() - 4 };
            bytes[at.index(span)] = v;
        }
        if let Some(c) = cut {
            bytes.truncate(c.index(bytes.len()));
        }
        // and re-seal it, so the decoder behind the checksum is what is tested
        if bytes.len() >= 4 {
            let body = bytes.len() - 4;
            let crc = crc32c::crc32c(&bytes[..body]);
            bytes[body..].copy_from_slice(&crc.to_le_bytes());
        }
        std::fs::write(&ck, &bytes).unwrap();
        let manifest = std::fs::read_to_string(dir.0.join("MANIFEST")).unwrap();
        let fixed = rewrite_manifest(&manifest, bytes.len() as u64, crc32c::crc32c(&bytes));
        std::fs::write(dir.0.join("MANIFEST"), fixed).unwrap();
        match open(&dir.0, opts()) {
            Ok(_) | Err(Error::Snapshot(_)) | Err(Error::InvalidConfig(_)) | Err(Error::InvalidInput(_)) => {}
            Err(e) => prop_assert!(false, "unexpected error kind: {e}"),
        }
    }
}

fn rewrite_manifest(text: &str, bytes: u64, crc: u32) -> String {
    text.lines()
        .map(|l| {
            if l.trim_start().starts_with("\"checkpoint_bytes\"") {
                format!("  \"checkpoint_bytes\": {bytes},")
            } else if l.trim_start().starts_with("\"checkpoint_crc32c\"") {
                format!("  \"checkpoint_crc32c\": {crc},")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_checksummed_record_the_store_refuses_is_corruption_too() {
    let _g = serial();
    let dir = TempDir::new("refused");
    let mut o = open(&dir.0, opts()).unwrap();
    for i in 0..3 {
        write(&mut o, i);
    }
    let good = state(&o.store);
    drop(o);
    // a well-formed record whose op cannot apply (an id from nowhere)
    let op = Op::AddNode {
        id: 99,
        node: node(99),
    };
    let payload = wal::encode_payload(1, &postcard::to_stdvec(&op).unwrap(), b"");
    let seg = last_segment(&dir.0);
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes.extend_from_slice(&wal::encode_record(4, &payload));
    std::fs::write(&seg, &bytes).unwrap();
    match open(&dir.0, opts()) {
        Err(Error::Snapshot(msg)) => assert!(msg.contains("record 4"), "{msg}"),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("replayed a record the store refuses"),
    }
    let o = open(
        &dir.0,
        DurableOptions {
            salvage: true,
            ..opts()
        },
    )
    .unwrap();
    assert_eq!(o.report.replayed_records, 3);
    assert_eq!(o.report.dropped_records, 1);
    assert_eq!(state(&o.store), good);
}

/// Past the exact tier, a reopened memory does not rebuild its HNSW graph
/// before it answers: replayed and checkpointed vectors come back pending,
/// every search over them is exact, and building the graph later changes
/// nothing a snapshot holds.
#[test]
fn recovery_past_the_exact_tier_defers_the_graph() {
    let _g = serial();
    let dir = TempDir::new("deferred");
    let mut config = StoreConfig::new(DIM);
    config.vector.exact_threshold = 16;
    let open_small = |dir: &Path| {
        let mut o = Durable::open(dir, config.clone(), "test-embedder", b"init", opts()).unwrap();
        o.store.set_journaling(true);
        o
    };
    let mut o = open_small(&dir.0);
    for i in 0..40 {
        write(&mut o, i);
    }
    // written one by one, the graph was built as the memory grew
    assert!(o.store.vectors().uses_hnsw());
    assert_eq!(o.store.pending_graph(), 0);
    let p = o.durable.prepare_checkpoint(&o.store, b"ck").unwrap();
    o.durable.finish_checkpoint(p).unwrap();
    for i in 40..60 {
        write(&mut o, i);
    }
    let query = [0.3f32, 1.0, -0.2, 0.7];
    let unit = jevmem_core::vector::VectorIndex::normalize(&query);
    let expected = o.store.vectors().exact_search(&unit, 10, None);
    let before = state(&o.store);
    drop(o);

    let mut o = open_small(&dir.0);
    assert_eq!(o.report.replayed_records, 20);
    assert_eq!(
        o.store.pending_graph(),
        60,
        "checkpoint and log vectors wait"
    );
    assert_eq!(
        o.store.vectors().search(&query, 10, None).unwrap(),
        expected
    );
    assert_eq!(state(&o.store), before);
    // a write while the graph is pending is logged and searchable too
    write(&mut o, 60);
    assert_eq!(o.store.pending_graph(), 60);
    let pending_state = state(&o.store);
    o.store.finish_graph().unwrap();
    assert_eq!(o.store.pending_graph(), 0);
    assert_eq!(state(&o.store), pending_state);
    let got = o.store.vectors().search(&query, 10, None).unwrap();
    assert_eq!(got.len(), 10);
}
