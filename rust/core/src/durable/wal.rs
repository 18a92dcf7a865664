//! The write-ahead log: segment files of length-prefixed, checksummed,
//! sequence-numbered records. One record is one request, all or nothing.
//!
//! Segment layout (little endian): magic `JEVMEMWL` (8), format version
//! (u32), reserved (u32), sequence number of its first record (u64), then
//! records. A record: payload length (u32), CRC-32C over the sequence number
//! and the payload (u32), sequence number (u64), payload.
//!
//! A payload: op count (u32), length of the caller's opaque state delta
//! (u32), that delta, then the ops, each postcard-encoded.

use std::fs::File;
use std::io::{self, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::failpoint;
use crate::ops::Op;

use super::fs as dfs;

pub const SEGMENT_MAGIC: &[u8; 8] = b"JEVMEMWL";
pub const SEGMENT_VERSION: u32 = 1;
pub const SEGMENT_HEADER_LEN: usize = 24;
pub const RECORD_HEADER_LEN: usize = 16;
/// No request is larger: the store caps one text at its `max_content_bytes`
/// and servers cap requests well below this.
pub const MAX_RECORD_BYTES: usize = 1 << 30;

pub fn segment_name(first_seq: u64) -> String {
    format!("wal-{first_seq:020}.log")
}

pub fn parse_segment_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("wal-")?.strip_suffix(".log")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

pub fn segment_header(first_seq: u64) -> [u8; SEGMENT_HEADER_LEN] {
    let mut h = [0u8; SEGMENT_HEADER_LEN];
    h[..8].copy_from_slice(SEGMENT_MAGIC);
    h[8..12].copy_from_slice(&SEGMENT_VERSION.to_le_bytes());
    h[16..24].copy_from_slice(&first_seq.to_le_bytes());
    h
}

fn record_crc(seq: u64, payload: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&seq.to_le_bytes()), payload)
}

/// Frame one record.
pub fn encode_record(seq: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(RECORD_HEADER_LEN + payload.len());
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&record_crc(seq, payload).to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// Build a payload from already postcard-encoded ops.
pub fn encode_payload(op_count: u32, ops: &[u8], delta: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + delta.len() + ops.len());
    out.extend_from_slice(&op_count.to_le_bytes());
    out.extend_from_slice(&(delta.len() as u32).to_le_bytes());
    out.extend_from_slice(delta);
    out.extend_from_slice(ops);
    out
}

/// A decoded payload.
#[derive(Debug, PartialEq)]
pub struct Entry {
    pub ops: Vec<Op>,
    pub delta: Vec<u8>,
}

pub fn decode_payload(payload: &[u8]) -> Result<Entry> {
    let bad = |what: &str| Error::Snapshot(format!("log record: {what}"));
    if payload.len() < 8 {
        return Err(bad("shorter than its header"));
    }
    let count = u32::from_le_bytes(payload[0..4].try_into().expect("4 bytes")) as usize;
    let delta_len = u32::from_le_bytes(payload[4..8].try_into().expect("4 bytes")) as usize;
    let rest = &payload[8..];
    if delta_len > rest.len() {
        return Err(bad("state delta longer than the record"));
    }
    let delta = rest[..delta_len].to_vec();
    let mut ops_bytes = &rest[delta_len..];
    // every op takes at least one byte: the count cannot allocate beyond the input
    if count > ops_bytes.len() {
        return Err(bad("more ops than bytes"));
    }
    let mut ops = Vec::with_capacity(count);
    for i in 0..count {
        let (op, tail) =
            postcard::take_from_bytes::<Op>(ops_bytes).map_err(|e| bad(&format!("op {i}: {e}")))?;
        ops.push(op);
        ops_bytes = tail;
    }
    if !ops_bytes.is_empty() {
        return Err(bad("trailing bytes after the last op"));
    }
    Ok(Entry { ops, delta })
}

/// Why reading stopped before the end of a segment.
#[derive(Clone, Debug, PartialEq)]
pub struct BadSpot {
    pub offset: usize,
    pub reason: String,
    /// A valid record with a later sequence number lies after it: this is
    /// corruption inside the log, not a torn tail.
    pub good_after: bool,
}

#[derive(Debug)]
pub struct SegmentScan {
    pub first_seq: u64,
    /// (sequence number, payload range) of each good record, in order.
    pub records: Vec<(u64, Range<usize>)>,
    /// End of the last good record (where a torn tail is cut).
    pub good_end: usize,
    pub bad: Option<BadSpot>,
}

fn check_record(
    bytes: &[u8],
    at: usize,
    expected_seq: u64,
) -> std::result::Result<(u64, Range<usize>), String> {
    let rest = bytes.len() - at;
    if rest < RECORD_HEADER_LEN {
        return Err(format!(
            "{rest} bytes left, a record header needs {RECORD_HEADER_LEN}"
        ));
    }
    let len = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) as usize;
    let crc = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().expect("4 bytes"));
    let seq = u64::from_le_bytes(bytes[at + 8..at + 16].try_into().expect("8 bytes"));
    if len > MAX_RECORD_BYTES || len > rest - RECORD_HEADER_LEN {
        return Err(format!(
            "record length {len} runs past the end of the segment"
        ));
    }
    let payload = at + RECORD_HEADER_LEN..at + RECORD_HEADER_LEN + len;
    if record_crc(seq, &bytes[payload.clone()]) != crc {
        return Err("checksum mismatch".into());
    }
    if seq != expected_seq {
        return Err(format!("sequence number {seq}, expected {expected_seq}"));
    }
    Ok((seq, payload))
}

/// Whether any valid record with a sequence number above `after` starts
/// somewhere in `bytes[from..]`. The sequence check comes first, so the
/// checksum runs only at plausible offsets.
fn valid_record_after(bytes: &[u8], from: usize, after: u64) -> bool {
    let mut at = from;
    while at + RECORD_HEADER_LEN <= bytes.len() {
        let seq = u64::from_le_bytes(bytes[at + 8..at + 16].try_into().expect("8 bytes"));
        if seq > after && seq - after <= 1 << 32 {
            let len = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) as usize;
            if len <= bytes.len() - at - RECORD_HEADER_LEN {
                let crc = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().expect("4 bytes"));
                let payload = &bytes[at + RECORD_HEADER_LEN..at + RECORD_HEADER_LEN + len];
                if record_crc(seq, payload) == crc {
                    return true;
                }
            }
        }
        at += 1;
    }
    false
}

/// How many checksum-valid records start in `bytes[from..]` (each one's
/// bytes skipped once found).
pub fn count_valid_records(bytes: &[u8], from: usize) -> u64 {
    let mut n = 0;
    let mut at = from;
    while at + RECORD_HEADER_LEN <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) as usize;
        if len <= bytes.len() - at - RECORD_HEADER_LEN {
            let crc = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().expect("4 bytes"));
            let seq = u64::from_le_bytes(bytes[at + 8..at + 16].try_into().expect("8 bytes"));
            let end = at + RECORD_HEADER_LEN + len;
            if record_crc(seq, &bytes[at + RECORD_HEADER_LEN..end]) == crc {
                n += 1;
                at = end;
                continue;
            }
        }
        at += 1;
    }
    n
}

/// Read every good record of one segment, starting at `first_seq`.
pub fn scan_segment(bytes: &[u8]) -> Result<SegmentScan> {
    if bytes.len() < SEGMENT_HEADER_LEN || &bytes[..8] != SEGMENT_MAGIC {
        // A segment created by a crash has no bytes past its header (records
        // follow the header's fsync): a bad header with bytes after it is
        // damage, and those bytes may be acknowledged records (never read
        // as a torn tail, which is dropped without a word).
        let damaged = bytes.len() > SEGMENT_HEADER_LEN;
        return Ok(SegmentScan {
            first_seq: 0,
            records: Vec::new(),
            good_end: 0,
            bad: Some(BadSpot {
                offset: 0,
                reason: if damaged {
                    "segment header damaged with records after it".into()
                } else {
                    "segment header missing or torn".into()
                },
                good_after: damaged,
            }),
        });
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if version != SEGMENT_VERSION {
        return Err(Error::Snapshot(format!(
            "log segment format version {version} is not supported (this build reads {SEGMENT_VERSION})"
        )));
    }
    let first_seq = u64::from_le_bytes(bytes[16..24].try_into().expect("8 bytes"));
    let mut records = Vec::new();
    let mut at = SEGMENT_HEADER_LEN;
    let mut expected = first_seq;
    let mut bad = None;
    while at < bytes.len() {
        match check_record(bytes, at, expected) {
            Ok((seq, payload)) => {
                at = payload.end;
                records.push((seq, payload));
                expected = seq + 1;
            }
            Err(reason) => {
                let good_after = valid_record_after(bytes, at + 1, expected.saturating_sub(1));
                bad = Some(BadSpot {
                    offset: at,
                    reason,
                    good_after,
                });
                break;
            }
        }
    }
    Ok(SegmentScan {
        first_seq,
        records,
        good_end: at,
        bad,
    })
}

/// [`scan_segment`] of the segment whose name says its first record is
/// `named_first`: a header that says otherwise is damaged (one flipped bit
/// there would make every record after it look out of sequence, and be
/// dropped as a torn tail), read as a bad header is.
pub fn scan_named_segment(bytes: &[u8], named_first: u64) -> Result<SegmentScan> {
    let scan = scan_segment(bytes)?;
    let header_bad = scan.bad.as_ref().is_some_and(|b| b.offset == 0);
    if header_bad || scan.first_seq == named_first {
        return Ok(scan);
    }
    let damaged = bytes.len() > SEGMENT_HEADER_LEN;
    Ok(SegmentScan {
        first_seq: named_first,
        records: Vec::new(),
        good_end: 0,
        bad: Some(BadSpot {
            offset: 0,
            reason: format!(
                "segment header names record {} as its first, its file name {named_first}",
                scan.first_seq
            ),
            good_after: damaged,
        }),
    })
}

/// List the segments in a directory, ascending by first sequence number.
pub fn list_segments(dir: &Path) -> io::Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if let Some(seq) = entry.file_name().to_str().and_then(parse_segment_name) {
            out.push((seq, entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// The open tail segment that records are appended to.
pub struct SegmentWriter {
    pub path: PathBuf,
    pub file: std::sync::Arc<File>,
    pub bytes: u64,
}

impl SegmentWriter {
    /// Start a new segment whose first record will be `first_seq`.
    pub fn create(dir: &Path, first_seq: u64) -> io::Result<SegmentWriter> {
        failpoint::hit("wal.rotate")?;
        let path = dir.join(segment_name(first_seq));
        let mut file = dfs::create_new(&path)?;
        file.write_all(&segment_header(first_seq))?;
        file.sync_all()?;
        dfs::sync_dir(dir)?;
        Ok(SegmentWriter {
            path,
            file: std::sync::Arc::new(file),
            bytes: SEGMENT_HEADER_LEN as u64,
        })
    }

    /// Reopen an existing segment for appending after `good_end` (a torn
    /// tail past it is cut first, and the cut made durable).
    pub fn reopen(path: &Path, good_end: u64) -> io::Result<SegmentWriter> {
        let file = std::fs::OpenOptions::new().write(true).open(path)?;
        if file.metadata()?.len() != good_end {
            file.set_len(good_end)?;
            file.sync_all()?;
        }
        Ok(SegmentWriter {
            path: path.to_path_buf(),
            file: std::sync::Arc::new(file),
            bytes: good_end,
        })
    }

    pub fn append(&mut self, record: &[u8]) -> io::Result<()> {
        use std::io::Seek;
        failpoint::hit("wal.write")?;
        let mut f: &File = &self.file;
        f.seek(io::SeekFrom::Start(self.bytes))?;
        if let Err(e) = f.write_all(record) {
            // leave no half record behind for the next append to follow
            let _ = self.file.set_len(self.bytes);
            return Err(e);
        }
        self.bytes += record.len() as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::NewNode;

    fn payload(i: u64) -> Vec<u8> {
        let op = Op::AddNode {
            id: i,
            node: NewNode::new(format!("record {i}"), vec![1.0, 0.0]),
        };
        let ops = postcard::to_stdvec(&op).unwrap();
        encode_payload(1, &ops, format!("delta {i}").as_bytes())
    }

    fn segment(n: u64) -> (Vec<u8>, Vec<usize>) {
        let mut bytes = segment_header(0).to_vec();
        let mut ends = Vec::new();
        for i in 0..n {
            bytes.extend_from_slice(&encode_record(i, &payload(i)));
            ends.push(bytes.len());
        }
        (bytes, ends)
    }

    #[test]
    fn round_trips_records() {
        let (bytes, ends) = segment(5);
        let scan = scan_segment(&bytes).unwrap();
        assert!(scan.bad.is_none());
        assert_eq!(scan.records.len(), 5);
        assert_eq!(scan.good_end, *ends.last().unwrap());
        let e = decode_payload(&bytes[scan.records[3].1.clone()]).unwrap();
        assert_eq!(e.delta, b"delta 3");
        assert!(matches!(&e.ops[0], Op::AddNode { id: 3, .. }));
    }

    #[test]
    fn a_torn_tail_at_every_byte_keeps_the_whole_records_before_it() {
        let (bytes, ends) = segment(4);
        for cut in SEGMENT_HEADER_LEN..bytes.len() {
            let scan = scan_segment(&bytes[..cut]).unwrap();
            let whole = ends.iter().filter(|&&e| e <= cut).count();
            assert_eq!(scan.records.len(), whole, "cut at {cut}");
            let bad = scan.bad.as_ref().map(|b| b.good_after);
            assert!(
                bad != Some(true),
                "cut at {cut}: a torn tail is not corruption"
            );
            assert_eq!(
                scan.good_end,
                if whole == 0 {
                    SEGMENT_HEADER_LEN
                } else {
                    ends[whole - 1]
                }
            );
        }
    }

    #[test]
    fn a_bad_record_before_good_ones_is_corruption() {
        let (mut bytes, ends) = segment(4);
        bytes[ends[0] + RECORD_HEADER_LEN + 2] ^= 0x40; // inside record 1's payload
        let scan = scan_segment(&bytes).unwrap();
        assert_eq!(scan.records.len(), 1);
        let bad = scan.bad.unwrap();
        assert_eq!(bad.offset, ends[0]);
        assert!(bad.good_after);
    }

    #[test]
    fn a_damaged_header_with_records_after_it_is_corruption_not_a_torn_tail() {
        let (mut bytes, _) = segment(2);
        bytes[0] ^= 0x01;
        let bad = scan_segment(&bytes).unwrap().bad.unwrap();
        assert_eq!(bad.offset, 0);
        assert!(bad.good_after, "records follow a damaged header: not torn");
        // a header cut short by a crash while the segment was created is torn
        for cut in 0..=SEGMENT_HEADER_LEN {
            let scan = scan_segment(&bytes[..cut]).unwrap();
            assert!(!scan.bad.unwrap().good_after, "cut at {cut}");
        }
    }

    #[test]
    fn a_header_whose_first_record_is_not_its_name_s_is_damaged() {
        let (bytes, _) = segment(3);
        assert_eq!(scan_named_segment(&bytes, 0).unwrap().records.len(), 3);
        for byte in 16..24 {
            for bit in 0..8 {
                let mut flipped = bytes.clone();
                flipped[byte] ^= 1 << bit;
                let scan = scan_named_segment(&flipped, 0).unwrap();
                let bad = scan.bad.expect("damage is reported");
                assert_eq!((bad.offset, scan.records.len()), (0, 0));
                assert!(
                    bad.good_after,
                    "records follow: corruption, never a torn tail"
                );
            }
        }
        // a header alone (a crash right after the segment was made) is torn
        let mut alone = segment_header(0).to_vec();
        alone[16] ^= 1;
        assert!(
            !scan_named_segment(&alone, 0)
                .unwrap()
                .bad
                .unwrap()
                .good_after
        );
    }

    #[test]
    fn payload_decoding_rejects_lies() {
        let mut p = payload(1);
        p[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_payload(&p).is_err());
        let mut p = payload(1);
        p[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_payload(&p).is_err());
        assert!(decode_payload(&[1, 2, 3]).is_err());
    }
}
