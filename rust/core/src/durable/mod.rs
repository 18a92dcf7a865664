//! Durable memories: a directory holding a checkpoint, a manifest and a
//! write-ahead log.
//!
//! ```text
//! DIR/LOCK                      held (flock) while the memory is open
//! DIR/MANIFEST                  JSON: current checkpoint, its size and CRC-32C,
//!                               the log position it covers, the embedder
//! DIR/checkpoint-<gen>.jvc      a snapshot of the store plus the caller's state
//! DIR/wal-<first seq>.log       log segments (see `wal`)
//! ```
//!
//! Guarantees, per [`SyncMode`]:
//! - `Sync`: a write is acknowledged after its record is fsynced. Concurrent
//!   writers share fsyncs (group commit): whoever finds no fsync running
//!   starts one that covers every record written so far.
//! - `Interval(d)`: acknowledged once the record is written to the OS; a
//!   background thread fsyncs every `d`. A process crash loses nothing
//!   acknowledged; an OS crash or power loss loses at most the last `d`.
//! - `None`: written to the OS, fsynced only at checkpoints and close. A
//!   process crash loses nothing acknowledged; power loss can lose anything
//!   since the last checkpoint.
//!
//! A failed write or fsync makes the memory read-only for good (the error
//! says why); the fsync is never retried, because after a failed fsync the
//! kernel may already have dropped the dirty pages it could not write.
//!
//! Checkpoint protocol: serialise the store and rotate the log to a fresh
//! segment (under the caller's store lock, so the checkpoint covers exactly
//! the records before the new segment), write the checkpoint file (unique
//! temp name, fsync, rename, fsync the directory), then the manifest the same
//! way, and only then delete the old checkpoint and the covered segments. A
//! crash anywhere leaves either the old manifest with its checkpoint and
//! every segment it needs, or the new one.

pub mod fs;
pub mod wal;

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::failpoint;
use crate::store::{MemoryStore, StoreConfig};

use wal::SegmentWriter;

pub const MANIFEST: &str = "MANIFEST";
pub const LOCK: &str = "LOCK";
pub const MANIFEST_FORMAT: u32 = 1;
const CHECKPOINT_MAGIC: &[u8; 8] = b"JEVMEMCK";
const CHECKPOINT_VERSION: u32 = 1;
const CHECKPOINT_HEADER_LEN: usize = 8 + 4 + 4 + 8 + 8 + 8;
/// Default segment size before the log rolls over to a new file.
pub const DEFAULT_SEGMENT_BYTES: u64 = 64 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncMode {
    Sync,
    Interval(Duration),
    None,
}

impl SyncMode {
    /// `"sync"`, `"none"`, or `"interval"` / `"interval:<ms>"` (default 100 ms).
    pub fn parse(s: &str) -> Result<SyncMode> {
        let bad = || {
            Error::config(format!(
                "durability {s:?}: expected \"sync\", \"interval[:MS]\" or \"none\""
            ))
        };
        match s {
            "sync" => Ok(SyncMode::Sync),
            "none" => Ok(SyncMode::None),
            "interval" => Ok(SyncMode::Interval(Duration::from_millis(100))),
            _ => {
                let ms: u64 = s
                    .strip_prefix("interval:")
                    .and_then(|m| m.parse().ok())
                    .ok_or_else(bad)?;
                if ms == 0 || ms > 3_600_000 {
                    return Err(bad());
                }
                Ok(SyncMode::Interval(Duration::from_millis(ms)))
            }
        }
    }

    pub fn name(&self) -> String {
        match self {
            SyncMode::Sync => "sync".into(),
            SyncMode::None => "none".into(),
            SyncMode::Interval(d) => format!("interval:{}", d.as_millis()),
        }
    }
}

#[derive(Clone, Debug)]
pub struct DurableOptions {
    pub sync: SyncMode,
    pub segment_bytes: u64,
    /// Open a log with a bad record followed by good ones by dropping
    /// everything from the bad record on (reported), instead of refusing.
    pub salvage: bool,
    /// Removed ids the checkpoint may claim (see `snapshot::LoadOptions`).
    pub max_absent_ids: Option<u64>,
}

impl Default for DurableOptions {
    fn default() -> Self {
        Self {
            sync: SyncMode::Sync,
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            salvage: false,
            max_absent_ids: None,
        }
    }
}

/// The manifest: which checkpoint is current and what made the memory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    pub generation: u64,
    pub checkpoint: String,
    pub checkpoint_bytes: u64,
    pub checkpoint_crc32c: u32,
    /// Every log record up to this sequence number is in the checkpoint.
    pub checkpoint_seq: u64,
    /// The caller's name for the embedder; `dim` is the store's dimension.
    pub embedder: String,
    pub dim: usize,
}

/// What opening found and did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecoveryReport {
    pub created: bool,
    pub checkpoint_seq: u64,
    pub replayed_records: u64,
    pub replayed_ops: u64,
    pub segments: usize,
    /// Bytes of a partly written last record, cut off.
    pub torn_tail_bytes: u64,
    /// With salvage: records and bytes dropped from a bad record on.
    pub dropped_records: u64,
    pub dropped_bytes: u64,
    pub dropped_reason: Option<String>,
}

/// A memory opened from its directory.
pub struct Opened {
    pub store: MemoryStore,
    pub durable: Durable,
    /// The caller's state saved with the checkpoint...
    pub state: Vec<u8>,
    /// ...and the deltas of every record replayed after it, in order.
    pub deltas: Vec<Vec<u8>>,
    pub report: RecoveryReport,
}

struct LogState {
    writer: SegmentWriter,
    next_seq: u64,
}

struct SyncState {
    /// Every record up to here is on disk.
    synced: u64,
    /// Highest sequence number written to the OS.
    written: u64,
    syncing: bool,
    failed: Option<String>,
}

struct Shared {
    dir: PathBuf,
    mode: SyncMode,
    segment_bytes: u64,
    log: Mutex<LogState>,
    sync: Mutex<SyncState>,
    synced_cv: Condvar,
    stop: Mutex<bool>,
    stop_cv: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn io_fail(what: &str, e: &std::io::Error) -> String {
    format!("{what} failed ({e}); the memory is read-only from now on, reopen it to recover")
}

impl Shared {
    fn fail(&self, msg: String) -> Error {
        let mut s = lock(&self.sync);
        if s.failed.is_none() {
            s.failed = Some(msg.clone());
        }
        self.synced_cv.notify_all();
        Error::Durability(s.failed.clone().unwrap_or(msg))
    }

    fn check(&self) -> Result<()> {
        match &lock(&self.sync).failed {
            Some(msg) => Err(Error::Durability(msg.clone())),
            None => Ok(()),
        }
    }

    /// fsync the tail segment, covering everything written before the call.
    fn sync_once(&self) -> Result<()> {
        let (file, target) = {
            let log = lock(&self.log);
            (log.writer.file.clone(), log.next_seq - 1)
        };
        let result = failpoint::hit("wal.fsync").and_then(|_| file.sync_data());
        let mut s = lock(&self.sync);
        s.syncing = false;
        match result {
            Ok(()) => {
                s.synced = s.synced.max(target);
                self.synced_cv.notify_all();
                Ok(())
            }
            Err(e) => {
                drop(s);
                Err(self.fail(io_fail("fsync of the write-ahead log", &e)))
            }
        }
    }

    /// Block until record `seq` is on disk, fsyncing as the group's leader
    /// when no fsync is running.
    fn wait_synced(&self, seq: u64) -> Result<()> {
        let mut s = lock(&self.sync);
        loop {
            if let Some(msg) = &s.failed {
                return Err(Error::Durability(msg.clone()));
            }
            if s.synced >= seq {
                return Ok(());
            }
            if !s.syncing {
                s.syncing = true;
                drop(s);
                self.sync_once()?;
                s = lock(&self.sync);
            } else {
                s = self.synced_cv.wait(s).unwrap_or_else(|e| e.into_inner());
            }
        }
    }

    fn flush_loop(self: Arc<Self>, every: Duration) {
        let mut stop = lock(&self.stop);
        loop {
            let (guard, _) = self
                .stop_cv
                .wait_timeout(stop, every)
                .unwrap_or_else(|e| e.into_inner());
            stop = guard;
            if *stop {
                return;
            }
            let due = {
                let s = lock(&self.sync);
                s.failed.is_none() && !s.syncing && s.written > s.synced
            };
            if due {
                lock(&self.sync).syncing = true;
                if self.sync_once().is_err() {
                    return;
                }
            }
        }
    }
}

/// The durable side of an open memory: its directory, log and manifest.
/// The store itself stays with the caller (behind its own lock).
pub struct Durable {
    shared: Arc<Shared>,
    manifest: Mutex<Manifest>,
    checkpointing: Mutex<()>,
    flusher: Option<JoinHandle<()>>,
    _lock: File,
}

/// A checkpoint taken under the store lock, to be written without it.
pub struct PendingCheckpoint {
    snapshot: Vec<u8>,
    state: Vec<u8>,
    seq: u64,
    keep_from: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct CheckpointReport {
    pub generation: u64,
    pub seq: u64,
    pub bytes: u64,
    pub segments_removed: usize,
}

fn checkpoint_name(generation: u64) -> String {
    format!("checkpoint-{generation:010}.jvc")
}

pub fn encode_checkpoint(seq: u64, state: &[u8], snapshot: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(CHECKPOINT_HEADER_LEN + state.len() + snapshot.len() + 4);
    out.extend_from_slice(CHECKPOINT_MAGIC);
    out.extend_from_slice(&CHECKPOINT_VERSION.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&(state.len() as u64).to_le_bytes());
    out.extend_from_slice(&(snapshot.len() as u64).to_le_bytes());
    out.extend_from_slice(state);
    out.extend_from_slice(snapshot);
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Whether `bytes` start like a checkpoint (also the one-file export format).
pub fn is_checkpoint(bytes: &[u8]) -> bool {
    bytes.starts_with(CHECKPOINT_MAGIC)
}

/// (covered seq, caller state, snapshot bytes); every length is checked
/// against the file before it is used.
pub fn decode_checkpoint(bytes: &[u8]) -> Result<(u64, &[u8], &[u8])> {
    let bad = |what: &str| Error::Snapshot(format!("checkpoint: {what}"));
    if bytes.len() < CHECKPOINT_HEADER_LEN + 4 || &bytes[..8] != CHECKPOINT_MAGIC {
        return Err(bad("not a jevmem checkpoint (bad magic or too short)"));
    }
    let (body, tail) = bytes.split_at(bytes.len() - 4);
    if crc32c::crc32c(body) != u32::from_le_bytes(tail.try_into().expect("4 bytes")) {
        return Err(bad("checksum mismatch: the file is corrupted"));
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if version != CHECKPOINT_VERSION {
        return Err(bad(&format!("format version {version} is not supported")));
    }
    let seq = u64::from_le_bytes(bytes[16..24].try_into().expect("8 bytes"));
    let state_len = u64::from_le_bytes(bytes[24..32].try_into().expect("8 bytes"));
    let snap_len = u64::from_le_bytes(bytes[32..40].try_into().expect("8 bytes"));
    let room = (body.len() - CHECKPOINT_HEADER_LEN) as u64;
    if state_len.checked_add(snap_len) != Some(room) {
        return Err(bad("section lengths do not match the file size"));
    }
    let state_end = CHECKPOINT_HEADER_LEN + state_len as usize;
    Ok((
        seq,
        &body[CHECKPOINT_HEADER_LEN..state_end],
        &body[state_end..],
    ))
}

fn read_manifest(dir: &Path) -> Result<Manifest> {
    let bytes = std::fs::read(dir.join(MANIFEST))?;
    let m: Manifest = serde_json::from_slice(&bytes)
        .map_err(|e| Error::Snapshot(format!("MANIFEST is not valid: {e}")))?;
    if m.format != MANIFEST_FORMAT {
        return Err(Error::Snapshot(format!(
            "MANIFEST format {} is not supported (this build reads {MANIFEST_FORMAT})",
            m.format
        )));
    }
    if m.checkpoint != checkpoint_name(m.generation) {
        return Err(Error::Snapshot(format!(
            "MANIFEST names checkpoint {:?} for generation {}",
            m.checkpoint, m.generation
        )));
    }
    Ok(m)
}

fn write_manifest(dir: &Path, m: &Manifest) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(m).map_err(|e| Error::Snapshot(e.to_string()))?;
    fs::atomic_write(
        &dir.join(MANIFEST),
        &bytes,
        ["manifest.write", "manifest.write", "manifest.rename"],
    )?;
    Ok(())
}

/// Refuse an export over one of a durable memory's own files (its
/// MANIFEST, LOCK, a checkpoint or a log segment, in a directory that holds
/// a MANIFEST): written there, the memory would no longer open.
pub fn check_export_path(path: &Path) -> Result<()> {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return Ok(());
    };
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    let own = name == MANIFEST
        || name == LOCK
        || name
            .strip_prefix("checkpoint-")
            .and_then(|r| r.strip_suffix(".jvc"))
            .is_some_and(|g| digits(g, 10))
        || name
            .strip_prefix("wal-")
            .and_then(|r| r.strip_suffix(".log"))
            .is_some_and(|s| digits(s, 20));
    let dir = fs::parent_of(path);
    if own && dir.join(MANIFEST).exists() {
        return Err(Error::invalid(format!(
            "{} is one of the files of the durable memory in {}; export to another name",
            path.display(),
            dir.display()
        )));
    }
    Ok(())
}

fn lock_dir(dir: &Path) -> Result<File> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(dir.join(LOCK))?;
    match f.try_lock() {
        Ok(()) => Ok(f),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::Durability(format!(
            "{} is open in another process or handle (its LOCK is held)",
            dir.display()
        ))),
        Err(std::fs::TryLockError::Error(e)) => Err(e.into()),
    }
}

/// Delete what a crash can leave in a memory's directory: checkpoints
/// other than `current` (a crash between a checkpoint's MANIFEST and its
/// cleanup keeps the old one) and the temporary files of MANIFEST and
/// checkpoint writes that never finished (with `own_temporaries` false,
/// only other processes': this one may be writing one). Both can hold
/// texts forgotten since, so they go at open (the LOCK held: nothing else
/// writes here) and after every checkpoint. Best effort, as any cleanup;
/// returns how many files went.
fn sweep_leftovers(dir: &Path, current: &str, own_temporaries: bool) -> usize {
    let own = format!(".tmp-{}-", std::process::id());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let old_checkpoint = name != current
            && name.starts_with("checkpoint-")
            && name.ends_with(".jvc")
            && name["checkpoint-".len()..name.len() - ".jvc".len()]
                .bytes()
                .all(|b| b.is_ascii_digit());
        let temporary = (name.starts_with(".MANIFEST.tmp-") || name.starts_with(".checkpoint-"))
            && name.contains(".tmp-")
            && (own_temporaries || !name.contains(&own));
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        if (old_checkpoint || temporary) && is_file && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    if removed > 0 {
        let _ = fs::sync_dir(dir);
    }
    removed
}

impl Durable {
    /// Open the memory in `dir`, creating it (with `config`, empty, and the
    /// caller's initial `state`) when the directory holds no memory yet.
    /// `embedder`: the caller's name for its embedder; an existing memory
    /// made with another one is refused, naming both.
    pub fn open(
        dir: &Path,
        config: StoreConfig,
        embedder: &str,
        state: &[u8],
        options: DurableOptions,
    ) -> Result<Opened> {
        if options.segment_bytes < 4096 {
            return Err(Error::config("segment_bytes must be at least 4096"));
        }
        std::fs::create_dir_all(dir)?;
        let dir_lock = lock_dir(dir)?;
        if !dir.join(MANIFEST).exists() {
            return Self::create(dir, config, embedder, state, options, dir_lock);
        }
        let manifest = read_manifest(dir)?;
        if manifest.embedder != embedder || manifest.dim != config.vector.dim {
            return Err(Error::config(format!(
                "{} was made with embedder {:?} (dimension {}); this one is {embedder:?} \
                 (dimension {})",
                dir.display(),
                manifest.embedder,
                manifest.dim,
                config.vector.dim
            )));
        }
        let ck_path = dir.join(&manifest.checkpoint);
        let ck_bytes = std::fs::read(&ck_path)
            .map_err(|e| Error::Snapshot(format!("checkpoint {}: {e}", manifest.checkpoint)))?;
        if ck_bytes.len() as u64 != manifest.checkpoint_bytes
            || crc32c::crc32c(&ck_bytes) != manifest.checkpoint_crc32c
        {
            return Err(Error::Snapshot(format!(
                "checkpoint {} does not match its MANIFEST entry (size or checksum)",
                manifest.checkpoint
            )));
        }
        let (seq, saved_state, snapshot) = decode_checkpoint(&ck_bytes)?;
        if seq != manifest.checkpoint_seq {
            return Err(Error::Snapshot(
                "checkpoint and MANIFEST disagree on the log position".into(),
            ));
        }
        let saved_state = saved_state.to_vec();
        // The graph is not rebuilt before the memory opens: vectors wait in
        // pending lists (searched exactly) for `build_pending_graph`.
        let load = || {
            let load = crate::snapshot::LoadOptions {
                defer_graph: true,
                max_absent_ids: options.max_absent_ids,
            };
            let mut store = MemoryStore::from_snapshot_bytes_with(snapshot, load)?;
            store.set_defer_graph(true);
            Ok(store)
        };
        let mut store = load()?;
        if store.dim() != manifest.dim {
            return Err(Error::Snapshot(
                "checkpoint dimension differs from MANIFEST".into(),
            ));
        }
        let (deltas, report, tail) = replay(dir, &mut store, seq, &options, load)?;
        sweep_leftovers(dir, &manifest.checkpoint, true);
        store.set_defer_graph(false);
        let mut report = report;
        report.checkpoint_seq = seq;
        let durable = Self::start(dir, manifest, options, dir_lock, tail)?;
        Ok(Opened {
            store,
            durable,
            state: saved_state,
            deltas,
            report,
        })
    }

    fn create(
        dir: &Path,
        config: StoreConfig,
        embedder: &str,
        state: &[u8],
        options: DurableOptions,
        dir_lock: File,
    ) -> Result<Opened> {
        let leftovers = wal::list_segments(dir)?;
        let has_checkpoints = std::fs::read_dir(dir)?
            .filter_map(|e| e.ok())
            .any(|e| e.file_name().to_string_lossy().starts_with("checkpoint-"));
        if !leftovers.is_empty() || has_checkpoints {
            return Err(Error::Snapshot(format!(
                "{} holds log or checkpoint files but no MANIFEST; refusing to start over it",
                dir.display()
            )));
        }
        let store = MemoryStore::new(config)?;
        let bytes = encode_checkpoint(0, state, &store.to_snapshot_bytes()?);
        let manifest = Manifest {
            format: MANIFEST_FORMAT,
            generation: 1,
            checkpoint: checkpoint_name(1),
            checkpoint_bytes: bytes.len() as u64,
            checkpoint_crc32c: crc32c::crc32c(&bytes),
            checkpoint_seq: 0,
            embedder: embedder.to_string(),
            dim: store.dim(),
        };
        fs::atomic_write(
            &dir.join(&manifest.checkpoint),
            &bytes,
            ["checkpoint.write", "checkpoint.fsync", "checkpoint.rename"],
        )?;
        let writer = SegmentWriter::create(dir, 1)?;
        write_manifest(dir, &manifest)?;
        let durable = Self::start(
            dir,
            manifest,
            options,
            dir_lock,
            Tail {
                writer,
                next_seq: 1,
            },
        )?;
        Ok(Opened {
            store,
            durable,
            state: state.to_vec(),
            deltas: Vec::new(),
            report: RecoveryReport {
                created: true,
                ..RecoveryReport::default()
            },
        })
    }

    fn start(
        dir: &Path,
        manifest: Manifest,
        options: DurableOptions,
        dir_lock: File,
        tail: Tail,
    ) -> Result<Durable> {
        let last = tail.next_seq - 1;
        let shared = Arc::new(Shared {
            dir: dir.to_path_buf(),
            mode: options.sync,
            segment_bytes: options.segment_bytes,
            log: Mutex::new(LogState {
                writer: tail.writer,
                next_seq: tail.next_seq,
            }),
            sync: Mutex::new(SyncState {
                synced: last,
                written: last,
                syncing: false,
                failed: None,
            }),
            synced_cv: Condvar::new(),
            stop: Mutex::new(false),
            stop_cv: Condvar::new(),
        });
        let flusher = match options.sync {
            SyncMode::Interval(every) => {
                let s = shared.clone();
                Some(
                    std::thread::Builder::new()
                        .name("jevmem-wal-flush".into())
                        .spawn(move || s.flush_loop(every))?,
                )
            }
            _ => None,
        };
        Ok(Durable {
            shared,
            manifest: Mutex::new(manifest),
            checkpointing: Mutex::new(()),
            flusher,
            _lock: dir_lock,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    pub fn mode(&self) -> SyncMode {
        self.shared.mode
    }

    pub fn manifest(&self) -> Manifest {
        lock(&self.manifest).clone()
    }

    /// The sequence number of the last record written.
    pub fn last_seq(&self) -> u64 {
        lock(&self.shared.log).next_seq - 1
    }

    /// `Some(reason)` once a write or fsync failed.
    pub fn failure(&self) -> Option<String> {
        lock(&self.shared.sync).failed.clone()
    }

    /// Write one record (already postcard-encoded ops plus the caller's
    /// state delta) to the OS; returns its sequence number. Call it under
    /// the same lock that applied the ops, so the log's order is the
    /// store's. Durability follows with [`Durable::wait`].
    pub fn append(&self, op_count: u32, ops: &[u8], delta: &[u8]) -> Result<u64> {
        let sh = &self.shared;
        sh.check()?;
        let payload = wal::encode_payload(op_count, ops, delta);
        if payload.len() > wal::MAX_RECORD_BYTES {
            // the ops are applied already: a request the log cannot hold
            // leaves the memory ahead of its log, so it takes no more writes
            // (reopening recovers what the log holds). The plane refuses
            // such a request before it applies anything; this is the guard.
            return Err(sh.fail(format!(
                "one request's log record would be {} bytes, the limit is {}",
                payload.len(),
                wal::MAX_RECORD_BYTES
            )));
        }
        let mut log = lock(&sh.log);
        let seq = log.next_seq;
        let record = wal::encode_record(seq, &payload);
        if log.writer.bytes + record.len() as u64 > sh.segment_bytes
            && log.writer.bytes > wal::SEGMENT_HEADER_LEN as u64
        {
            // the old segment is made durable before the log moves on, so
            // one fsync of the tail always covers everything written
            let old = log.writer.file.clone();
            if let Err(e) = failpoint::hit("wal.fsync").and_then(|_| old.sync_data()) {
                drop(log);
                return Err(sh.fail(io_fail("fsync of a full log segment", &e)));
            }
            match SegmentWriter::create(&sh.dir, seq) {
                Ok(w) => log.writer = w,
                Err(e) => {
                    drop(log);
                    return Err(sh.fail(io_fail("starting a new log segment", &e)));
                }
            }
        }
        if let Err(e) = log.writer.append(&record) {
            drop(log);
            return Err(sh.fail(io_fail("writing the write-ahead log", &e)));
        }
        log.next_seq += 1;
        lock(&sh.sync).written = seq;
        Ok(seq)
    }

    /// Return once record `seq` is as durable as the mode promises.
    pub fn wait(&self, seq: u64) -> Result<()> {
        match self.shared.mode {
            SyncMode::Sync => self.shared.wait_synced(seq),
            SyncMode::Interval(_) | SyncMode::None => self.shared.check(),
        }
    }

    /// fsync everything written so far (any mode).
    pub fn flush(&self) -> Result<()> {
        let last = self.last_seq();
        self.shared.wait_synced(last)
    }

    /// First half of a checkpoint, under the caller's store lock: serialise
    /// the store and start a new log segment, so the checkpoint covers
    /// exactly the records before it.
    pub fn prepare_checkpoint(
        &self,
        store: &MemoryStore,
        state: &[u8],
    ) -> Result<PendingCheckpoint> {
        let sh = &self.shared;
        sh.check()?;
        if store.journal_pending() {
            return Err(Error::InvalidState(
                "a checkpoint needs every applied op logged first (commit the open write)".into(),
            ));
        }
        let snapshot = store.to_snapshot_bytes()?;
        let mut log = lock(&sh.log);
        let seq = log.next_seq - 1;
        if log.writer.bytes > wal::SEGMENT_HEADER_LEN as u64 {
            let old = log.writer.file.clone();
            if let Err(e) = failpoint::hit("wal.fsync").and_then(|_| old.sync_data()) {
                drop(log);
                return Err(sh.fail(io_fail("fsync of the write-ahead log", &e)));
            }
            match SegmentWriter::create(&sh.dir, log.next_seq) {
                Ok(w) => log.writer = w,
                Err(e) => {
                    drop(log);
                    return Err(sh.fail(io_fail("starting a new log segment", &e)));
                }
            }
        }
        Ok(PendingCheckpoint {
            snapshot,
            state: state.to_vec(),
            seq,
            keep_from: log.next_seq,
        })
    }

    /// Second half, without the store lock: write the checkpoint and the
    /// manifest, then drop what they replace. A failure here leaves the old
    /// checkpoint current and the memory writable (nothing acknowledged
    /// depends on the new files); the error says what failed.
    pub fn finish_checkpoint(&self, pending: PendingCheckpoint) -> Result<CheckpointReport> {
        let _one_at_a_time = lock(&self.checkpointing);
        let sh = &self.shared;
        let bytes = encode_checkpoint(pending.seq, &pending.state, &pending.snapshot);
        let old = self.manifest();
        if pending.seq < old.checkpoint_seq {
            return Err(Error::InvalidState(
                "an older checkpoint finished after a newer one".into(),
            ));
        }
        let next = Manifest {
            generation: old.generation + 1,
            checkpoint: checkpoint_name(old.generation + 1),
            checkpoint_bytes: bytes.len() as u64,
            checkpoint_crc32c: crc32c::crc32c(&bytes),
            checkpoint_seq: pending.seq,
            ..old.clone()
        };
        let ck_path = sh.dir.join(&next.checkpoint);
        if let Err(e) = fs::atomic_write(
            &ck_path,
            &bytes,
            ["checkpoint.write", "checkpoint.fsync", "checkpoint.rename"],
        ) {
            let _ = std::fs::remove_file(&ck_path);
            return Err(e.into());
        }
        if let Err(e) = write_manifest(&sh.dir, &next) {
            let _ = std::fs::remove_file(&ck_path);
            return Err(e);
        }
        *lock(&self.manifest) = next.clone();
        // From here the new checkpoint is current; cleaning up may fail
        // without harm (the next open or checkpoint removes leftovers).
        let mut removed = 0;
        let _ = (|| -> std::io::Result<()> {
            failpoint::hit("checkpoint.cleanup")?;
            // the one before, and any an earlier failed cleanup left
            sweep_leftovers(&sh.dir, &next.checkpoint, false);
            for (first, path) in wal::list_segments(&sh.dir)? {
                if first < pending.keep_from {
                    std::fs::remove_file(path)?;
                    removed += 1;
                }
            }
            fs::sync_dir(&sh.dir)
        })();
        Ok(CheckpointReport {
            generation: next.generation,
            seq: pending.seq,
            bytes: bytes.len() as u64,
            segments_removed: removed,
        })
    }
}

impl Drop for Durable {
    fn drop(&mut self) {
        *lock(&self.shared.stop) = true;
        self.shared.stop_cv.notify_all();
        if let Some(h) = self.flusher.take() {
            let _ = h.join();
        }
        // a clean close makes everything written durable, whatever the mode
        if self.shared.check().is_ok() {
            let _ = self.flush();
        }
    }
}

/// Where appends continue after opening.
struct Tail {
    writer: SegmentWriter,
    next_seq: u64,
}

type Replayed = (Vec<Vec<u8>>, RecoveryReport, Tail);

/// Apply every logged record after `from_seq` to `store`.
fn replay(
    dir: &Path,
    store: &mut MemoryStore,
    from_seq: u64,
    options: &DurableOptions,
    reload: impl Fn() -> Result<MemoryStore>,
) -> Result<Replayed> {
    let segments = wal::list_segments(dir)?;
    let mut report = RecoveryReport {
        segments: segments.len(),
        ..RecoveryReport::default()
    };
    // Covered segments left by a crash after a checkpoint's manifest: a
    // segment is covered when the next one starts at or before from_seq + 1.
    let mut live = Vec::new();
    for (i, (first, path)) in segments.iter().enumerate() {
        let next_first = segments.get(i + 1).map(|(f, _)| *f);
        if next_first.is_some_and(|n| n <= from_seq + 1) {
            let _ = std::fs::remove_file(path);
            continue;
        }
        live.push((*first, path.clone()));
    }
    // Pass 1: read and check every record; find where good data ends.
    // Each entry keeps where its record starts (segment, byte).
    let mut entries: Vec<(u64, wal::Entry, usize, usize)> = Vec::new();
    let mut expected = from_seq + 1;
    let mut cut: Option<(usize, usize, String)> = None; // bad data from here on
    let mut torn: Option<(usize, usize, usize)> = None; // (segment, good end, file length)
    'segments: for (i, (named_first, path)) in live.iter().enumerate() {
        let bytes = std::fs::read(path)?;
        let scan = wal::scan_named_segment(&bytes, *named_first).map_err(|e| match e {
            Error::Snapshot(m) => {
                Error::Snapshot(format!("write-ahead log {}: {m}", path.display()))
            }
            other => other,
        })?;
        let is_last = i + 1 == live.len();
        for (seq, range) in &scan.records {
            let at = range.start - wal::RECORD_HEADER_LEN;
            if *seq < expected {
                continue;
            }
            if *seq > expected {
                let reason = format!("the log jumps from record {} to {seq}", expected - 1);
                cut = Some((i, at, reason));
                break 'segments;
            }
            match wal::decode_payload(&bytes[range.clone()]) {
                Ok(e) => entries.push((*seq, e, i, at)),
                Err(e) => {
                    cut = Some((i, at, e.to_string()));
                    break 'segments;
                }
            }
            expected = seq + 1;
        }
        if let Some(bad) = scan.bad {
            if is_last && !bad.good_after {
                torn = Some((i, scan.good_end, bytes.len()));
            } else {
                cut = Some((i, bad.offset, bad.reason));
                break;
            }
        }
    }
    // Pass 2: apply, runs of added nodes in one batch each. An op the store
    // refuses is corruption too: the store is rebuilt and the log applied
    // again record by record, to name the record; with salvage the replay
    // then stops before it.
    let mut applied = entries.len();
    let total_ops: u64 = entries.iter().map(|e| e.1.ops.len() as u64).sum();
    // the fast path moves the ops out (no copy of every text and vector);
    // the slow path reads them from the files again
    let fast = apply_batched(store, &mut entries);
    if fast.is_err() {
        reread_ops(&live, &mut entries)?;
        *store = reload()?;
        let mut refused = None;
        'records: for (k, (seq, entry, _, _)) in entries.iter().enumerate() {
            for op in &entry.ops {
                if let Err(e) = store.apply(op.clone()) {
                    refused = Some((k, *seq, e));
                    break 'records;
                }
            }
        }
        let (k, seq, e) = match refused {
            Some(r) => r,
            // the batch refused what single ops accept: report it as such
            None => {
                let e = fast.expect_err("failed");
                return Err(Error::Snapshot(format!(
                    "replaying the write-ahead log: {e}"
                )));
            }
        };
        if !options.salvage {
            return Err(Error::Snapshot(format!(
                "write-ahead log record {seq} cannot be applied ({e}); \
                 refusing to open (open with salvage to drop it and what follows)"
            )));
        }
        *store = reload()?;
        for (_, earlier, _, _) in &entries[..k] {
            for op in &earlier.ops {
                store.apply(op.clone())?;
            }
        }
        applied = k;
        let (_, _, seg, at) = &entries[k];
        cut = Some((*seg, *at, format!("record {seq} cannot be applied: {e}")));
        torn = None;
    }
    report.replayed_ops = total_ops;
    report.replayed_records = applied as u64;
    if applied < entries.len() {
        report.replayed_ops = entries[..applied]
            .iter()
            .map(|e| e.1.ops.len() as u64)
            .sum();
    }
    let next_seq = from_seq + 1 + applied as u64;
    let deltas: Vec<Vec<u8>> = entries
        .into_iter()
        .take(applied)
        .map(|(_, e, _, _)| e.delta)
        .collect();
    let tail = if let Some((seg, offset, reason)) = cut {
        let here = std::fs::metadata(&live[seg].1)?.len();
        let later: u64 = live[seg + 1..]
            .iter()
            .filter_map(|(_, p)| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum();
        let dropped_bytes = here.saturating_sub(offset as u64) + later;
        let where_ = format!("{}: byte {offset}", live[seg].1.display());
        if !options.salvage {
            return Err(Error::Snapshot(format!(
                "write-ahead log {where_}: bad record ({reason}) with {dropped_bytes} bytes of \
                 log from it on; refusing to open (open with salvage to drop them)"
            )));
        }
        report.dropped_records = count_records_from(&live, seg, offset);
        report.dropped_bytes = dropped_bytes;
        report.dropped_reason = Some(format!("{where_}: {reason}"));
        // Nothing is destroyed: the dropped bytes move to a side directory
        // of their own (a second salvage never writes over a first's), made
        // durable before the log is cut.
        let aside = new_aside_dir(dir)?;
        let bytes = std::fs::read(&live[seg].1)?;
        if let Some(name) = live[seg].1.file_name() {
            let mut copy = fs::create_new(&aside.join(name))?;
            copy.write_all(&bytes[offset.min(bytes.len())..])?;
            copy.sync_all()?;
        }
        for (_, path) in &live[seg + 1..] {
            if let Some(name) = path.file_name() {
                std::fs::rename(path, aside.join(name))?;
            }
        }
        fs::sync_dir(&aside)?;
        fs::sync_dir(dir)?;
        if offset < wal::SEGMENT_HEADER_LEN {
            std::fs::remove_file(&live[seg].1)?;
            fs::sync_dir(dir)?;
            Tail {
                writer: SegmentWriter::create(dir, next_seq)?,
                next_seq,
            }
        } else {
            let writer = SegmentWriter::reopen(&live[seg].1, offset as u64)?;
            fs::sync_dir(dir)?;
            Tail { writer, next_seq }
        }
    } else if let Some((seg, good_end, len)) = torn {
        report.torn_tail_bytes = (len - good_end) as u64;
        if good_end < wal::SEGMENT_HEADER_LEN {
            // the segment's own header never made it whole: start it again
            std::fs::remove_file(&live[seg].1)?;
            Tail {
                writer: SegmentWriter::create(dir, next_seq)?,
                next_seq,
            }
        } else {
            Tail {
                writer: SegmentWriter::reopen(&live[seg].1, good_end as u64)?,
                next_seq,
            }
        }
    } else if let Some((_, path)) = live.last() {
        let len = std::fs::metadata(path)?.len();
        Tail {
            writer: SegmentWriter::reopen(path, len)?,
            next_seq,
        }
    } else {
        Tail {
            writer: SegmentWriter::create(dir, next_seq)?,
            next_seq,
        }
    };
    Ok((deltas, report, tail))
}

/// A new, empty `salvaged-<unix seconds>[-<n>]` directory in `dir`.
fn new_aside_dir(dir: &Path) -> Result<PathBuf> {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    for n in 0u32.. {
        let name = if n == 0 {
            format!("salvaged-{secs}")
        } else {
            format!("salvaged-{secs}-{n}")
        };
        match std::fs::create_dir(dir.join(&name)) {
            Ok(()) => return Ok(dir.join(name)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e.into()),
        }
    }
    unreachable!("some name is free")
}

/// Apply every entry's ops in order, consecutive `AddNode`s as one batch.
fn apply_batched(
    store: &mut MemoryStore,
    entries: &mut [(u64, wal::Entry, usize, usize)],
) -> Result<()> {
    let mut run: Vec<(crate::types::NodeId, crate::ops::NewNode)> = Vec::new();
    for (_, entry, _, _) in entries.iter_mut() {
        failpoint::hit("recovery.replay")?;
        for op in std::mem::take(&mut entry.ops) {
            match op {
                crate::ops::Op::AddNode { id, node } => run.push((id, node)),
                other => {
                    if !run.is_empty() {
                        store.apply_add_run(std::mem::take(&mut run))?;
                    }
                    store.apply(other)?;
                }
            }
        }
    }
    if !run.is_empty() {
        store.apply_add_run(run)?;
    }
    Ok(())
}

/// Decode every entry's ops again from its segment (after the fast path
/// moved them out).
fn reread_ops(
    live: &[(u64, PathBuf)],
    entries: &mut [(u64, wal::Entry, usize, usize)],
) -> Result<()> {
    let mut cached: Option<(usize, Vec<u8>)> = None;
    for (_, entry, seg, at) in entries.iter_mut() {
        if cached.as_ref().map(|c| c.0) != Some(*seg) {
            cached = Some((*seg, std::fs::read(&live[*seg].1)?));
        }
        let bytes = &cached.as_ref().expect("just read").1;
        let len = u32::from_le_bytes(bytes[*at..*at + 4].try_into().expect("4 bytes")) as usize;
        let start = *at + wal::RECORD_HEADER_LEN;
        entry.ops = wal::decode_payload(&bytes[start..start + len])?.ops;
    }
    Ok(())
}

/// Records a salvage drops: valid-looking ones from `offset` of segment
/// `seg` on (a count for the report).
fn count_records_from(live: &[(u64, PathBuf)], seg: usize, offset: usize) -> u64 {
    let mut n = 0;
    for (i, (_, path)) in live.iter().enumerate().skip(seg) {
        let Ok(bytes) = std::fs::read(path) else {
            continue;
        };
        let from = if i == seg {
            offset
        } else {
            wal::SEGMENT_HEADER_LEN
        };
        n += wal::count_valid_records(&bytes, from);
    }
    n
}
