//! The on-disk format of logs and checkpoints: segment headers, records, the durable-point
//! marker. Everything is little-endian; every record and header carries a CRC32C (Castagnoli,
//! the `crc32c` crate: SSE4.2 on x86-64).
//!
//! ## Segment header (64 bytes, at offset 0 of every log segment and checkpoint file)
//!
//! ```text
//!  0  magic        b"TXLABLOG"
//!  8  version      u32   (FORMAT_VERSION)
//! 12  kind         u32   (1 per-worker log segment, 2 central log segment, 3 checkpoint file)
//! 16  fingerprint  u64   (the schema's: table names, row sizes and columns, see `fingerprint`)
//! 24  stream       u32   (the log's worker slot; a checkpoint's partition)
//! 28  seq          u32   (segment number within its stream, from 0, no gaps)
//! 32  aux          u64   (checkpoint: its start epoch; central log: the offset in the LSN
//!                         space where the segment starts; per-worker logs: 0)
//! 40  reserved     20 zero bytes
//! 60  crc32c       u32   of bytes 0..60
//! ```
//!
//! ## Record (32 bytes of header and trailer, plus the row image)
//!
//! ```text
//!  0  len     u32   whole record, CRC included (32 + payload)
//!  4  kind    u16   TXN = 1, PUT = 2, DELETE = 3, COLS = 5 (SKIP = 4: see below)
//!  6  zero    u16
//!  8  table   u32   (TXN: the number of PUT/DELETE records that follow)
//! 12  stamp   u64   the commit stamp (the same in a transaction's every record)
//! 20  key     u64   (TXN: the commit epoch)
//! 28  payload       PUT: the row image; COLS: the written columns' mask (u64), then the
//!                   payload words those columns cover, run after run (`Projection::runs`;
//!                   the row's last word may be partial); TXN: up to 7 zero bytes of padding
//!                   (the central log's blocks are multiples of 8 bytes)
//! len-4 crc32c u32  of bytes 0..len-4
//! ```
//!
//! A SKIP record fills the rest of a central log segment that a transaction's block did not fit
//! in (ERMIA §3.2): `len` (a multiple of 8, at least 8), `kind` = 4, then at bytes 6..8 the low
//! 16 bits of the CRC32C of bytes 0..6; the remaining bytes are zero and not checked.
//!
//! A committed transaction is a TXN record followed by exactly `count` records of its writes,
//! contiguous in one stream; a checkpoint file holds PUT records only. The per-record CRC lets a
//! reader tell a torn tail (bad bytes up to the end of what was written) from a transaction
//! that is complete, and a transaction counts only when all its records are intact.

use crate::storage::TableSpec;

/// The segment files' magic.
pub const MAGIC: &[u8; 8] = b"TXLABLOG";
/// The format version this build writes and reads.
pub const FORMAT_VERSION: u32 = 2;
/// Size of a segment header.
pub const HEADER_LEN: usize = 64;
/// Record header and trailer bytes around the payload.
pub const RECORD_OVERHEAD: usize = 32;
/// Where a record's payload starts.
pub const PAYLOAD_AT: usize = 28;

/// What a segment file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// A per-worker log segment.
    Log = 1,
    /// A central log segment (stream 0).
    CentralLog = 2,
    /// A checkpoint partition.
    Checkpoint = 3,
}

impl FileKind {
    fn from_u32(v: u32) -> Option<FileKind> {
        match v {
            1 => Some(FileKind::Log),
            2 => Some(FileKind::CentralLog),
            3 => Some(FileKind::Checkpoint),
            _ => None,
        }
    }
}

/// A record's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    /// A transaction's first record: its stamp, epoch and number of writes.
    Txn = 1,
    /// A row image.
    Put = 2,
    /// A deletion.
    Delete = 3,
    /// Filler up to the end of a central log segment.
    Skip = 4,
    /// The columns a transaction wrote: their mask, then the words they cover.
    Cols = 5,
}

impl RecordKind {
    fn from_u16(v: u16) -> Option<RecordKind> {
        match v {
            1 => Some(RecordKind::Txn),
            2 => Some(RecordKind::Put),
            3 => Some(RecordKind::Delete),
            4 => Some(RecordKind::Skip),
            5 => Some(RecordKind::Cols),
            _ => None,
        }
    }
}

/// A decoded segment header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    /// What the file holds.
    pub kind: FileKind,
    /// The schema fingerprint.
    pub fingerprint: u64,
    /// Stream (worker slot or checkpoint partition).
    pub stream: u32,
    /// Segment number within the stream.
    pub seq: u32,
    /// Checkpoint: its start epoch.
    pub aux: u64,
}

impl SegmentHeader {
    /// The 64 header bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&(self.kind as u32).to_le_bytes());
        b[16..24].copy_from_slice(&self.fingerprint.to_le_bytes());
        b[24..28].copy_from_slice(&self.stream.to_le_bytes());
        b[28..32].copy_from_slice(&self.seq.to_le_bytes());
        b[32..40].copy_from_slice(&self.aux.to_le_bytes());
        let crc = crc32c::crc32c(&b[..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes and checks a header: the message says what is wrong (the caller adds the file).
    pub fn decode(b: &[u8], fingerprint: u64) -> Result<SegmentHeader, String> {
        if b.len() < HEADER_LEN {
            return Err(format!("too short for a segment header ({} of 64 bytes)", b.len()));
        }
        if &b[0..8] != MAGIC {
            return Err("not a txlab log or checkpoint file (bad magic)".into());
        }
        if crc32c::crc32c(&b[..60]) != u32le(b, 60) {
            return Err("segment header checksum mismatch".into());
        }
        let version = u32le(b, 8);
        if version != FORMAT_VERSION {
            return Err(format!(
                "written in log format version {version}, this build reads version {FORMAT_VERSION}"
            ));
        }
        let kind = FileKind::from_u32(u32le(b, 12))
            .ok_or_else(|| format!("unknown file kind {}", u32le(b, 12)))?;
        let found = u64le(b, 16);
        if found != fingerprint {
            return Err(format!(
                "schema mismatch: written for schema {found:016x}, the database has {fingerprint:016x}"
            ));
        }
        Ok(SegmentHeader {
            kind,
            fingerprint: found,
            stream: u32le(b, 24),
            seq: u32le(b, 28),
            aux: u64le(b, 32),
        })
    }
}

/// The schema fingerprint: FNV-1a over every table's name, row size and column layout, in table
/// order. Indexes, capacities and phantom settings do not change what a row image or a COLS
/// record means, so they are left out.
/// (FNV by hand: eight lines, and the value must never change with a crate's version.)
pub fn fingerprint(tables: &[TableSpec]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for t in tables {
        eat(t.name.as_bytes());
        eat(&[0]);
        eat(&(t.row_size as u64).to_le_bytes());
        // COLS records are laid out by the columns.
        for c in &t.columns {
            eat(&(c.offset as u64).to_le_bytes());
            eat(&(c.len as u64).to_le_bytes());
        }
    }
    h
}

/// Writes the header fields of a record into `dst[..PAYLOAD_AT]`.
#[inline]
pub fn put_header(dst: &mut [u8], len: u32, kind: RecordKind, table: u32, stamp: u64, key: u64) {
    dst[0..4].copy_from_slice(&len.to_le_bytes());
    dst[4..6].copy_from_slice(&(kind as u16).to_le_bytes());
    dst[6..8].copy_from_slice(&[0, 0]);
    dst[8..12].copy_from_slice(&table.to_le_bytes());
    dst[12..20].copy_from_slice(&stamp.to_le_bytes());
    dst[20..28].copy_from_slice(&key.to_le_bytes());
}

/// The smallest SKIP record.
pub const SKIP_MIN: usize = 8;

/// The check bits of a SKIP record of `len` bytes (bytes 6..8).
fn skip_check(head: &[u8]) -> u16 {
    crc32c::crc32c(&head[..6]) as u16
}

/// The first 8 bytes of a SKIP record of `len` bytes (a multiple of 8, at least 8); the rest
/// are zeros.
pub fn skip_header(len: u32) -> [u8; SKIP_MIN] {
    debug_assert!(len as usize >= SKIP_MIN && len % 8 == 0);
    let mut h = [0u8; SKIP_MIN];
    h[0..4].copy_from_slice(&len.to_le_bytes());
    h[4..6].copy_from_slice(&(RecordKind::Skip as u16).to_le_bytes());
    let check = skip_check(&h);
    h[6..8].copy_from_slice(&check.to_le_bytes());
    h
}

/// Writes a SKIP record over all of `dst`.
pub fn encode_skip(dst: &mut [u8]) {
    let head = skip_header(dst.len() as u32);
    dst.fill(0);
    dst[..SKIP_MIN].copy_from_slice(&head);
}

/// Appends a whole record to `out` (tests, checkpoints, recovery tools; the workers' hot path
/// writes records in place, see `log::LogWriter`).
pub fn encode_record(
    out: &mut Vec<u8>,
    kind: RecordKind,
    table: u32,
    stamp: u64,
    key: u64,
    payload: &[u8],
) {
    let len = RECORD_OVERHEAD + payload.len();
    let at = out.len();
    out.resize(at + len, 0);
    let rec = &mut out[at..];
    put_header(rec, len as u32, kind, table, stamp, key);
    rec[PAYLOAD_AT..PAYLOAD_AT + payload.len()].copy_from_slice(payload);
    let crc = crc32c::crc32c(&rec[..len - 4]);
    rec[len - 4..].copy_from_slice(&crc.to_le_bytes());
}

/// A decoded record, borrowing its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// Kind.
    pub kind: RecordKind,
    /// Table (TXN: the number of writes that follow).
    pub table: u32,
    /// Commit stamp.
    pub stamp: u64,
    /// Key (TXN: the commit epoch).
    pub key: u64,
    /// Row image (PUT), empty otherwise.
    pub payload: &'a [u8],
}

/// Why a record could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bad {
    /// The bytes end inside the record (or its length word).
    Truncated,
    /// Zero length: the end of the written part of a preallocated or zero-filled file.
    Zero,
    /// The length, kind or padding is impossible, or the checksum does not match.
    Corrupt(&'static str),
}

/// Decodes the record at the start of `b`; returns it and its length.
pub fn decode_record(b: &[u8]) -> Result<(Record<'_>, usize), Bad> {
    if b.len() < 4 {
        return if b.iter().all(|&x| x == 0) { Err(Bad::Zero) } else { Err(Bad::Truncated) };
    }
    let len = u32le(b, 0) as usize;
    if len == 0 {
        return Err(Bad::Zero);
    }
    if b.len() >= 6 && u16::from_le_bytes([b[4], b[5]]) == RecordKind::Skip as u16 {
        if b.len() < SKIP_MIN {
            return Err(Bad::Truncated);
        }
        if u16::from_le_bytes([b[6], b[7]]) != skip_check(b) {
            return Err(Bad::Corrupt("skip record checksum mismatch"));
        }
        if len % 8 != 0 {
            return Err(Bad::Corrupt("impossible skip record length"));
        }
        if b.len() < len {
            return Err(Bad::Truncated);
        }
        let r = Record { kind: RecordKind::Skip, table: 0, stamp: 0, key: 0, payload: &[] };
        return Ok((r, len));
    }
    if len < RECORD_OVERHEAD {
        return Err(Bad::Corrupt("impossible record length"));
    }
    if b.len() < len {
        return Err(Bad::Truncated);
    }
    let crc = u32le(b, len - 4);
    if crc32c::crc32c(&b[..len - 4]) != crc {
        return Err(Bad::Corrupt("record checksum mismatch"));
    }
    let kind = RecordKind::from_u16(u16::from_le_bytes([b[4], b[5]]))
        .ok_or(Bad::Corrupt("unknown record kind"))?;
    if b[6] != 0 || b[7] != 0 {
        return Err(Bad::Corrupt("nonzero padding"));
    }
    let payload = &b[PAYLOAD_AT..len - 4];
    match kind {
        RecordKind::Put => {}
        RecordKind::Cols if payload.len() >= 8 => {}
        RecordKind::Cols => return Err(Bad::Corrupt("written columns without their mask")),
        RecordKind::Txn if payload.len() < 8 && payload.iter().all(|&x| x == 0) => {}
        _ if payload.is_empty() => {}
        _ => return Err(Bad::Corrupt("payload on a record that has none")),
    }
    Ok((Record { kind, table: u32le(b, 8), stamp: u64le(b, 12), key: u64le(b, 20), payload }, len))
}

#[inline]
fn u32le(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

#[inline]
fn u64le(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// The durable-point marker (`DIR/durable`): two slots of equal size written alternately, so a
/// torn slot write leaves the other intact. A slot:
///
/// ```text
///  0  crc32c   u32  of bytes 4..32 + 12 * streams
///  4  streams  u32
///  8  seq      u64  (the valid slot with the larger seq is the marker)
/// 16  durable  u64  every transaction of a log epoch <= durable is on disk
/// 24  zero     u64
/// 32  per stream: segment u32 (u32::MAX: none), end u64 (bytes of that segment synced)
/// ```
///
/// The per-stream ends tell recovery where each stream's synced bytes end: a bad record before
/// its end is corruption (an error), one after it is the torn tail of an unsynced write.
pub mod marker {
    /// The end of a stream that has no segment.
    pub const NONE: (u32, u64) = (u32::MAX, 0);

    /// A decoded marker.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct Marker {
        /// Every transaction of a log epoch up to this is durable.
        pub durable: u64,
        /// Per stream: (segment, bytes synced), or [`NONE`].
        pub ends: Vec<(u32, u64)>,
    }

    /// Bytes per slot for `streams` streams (a multiple of 4 KiB).
    pub fn slot_len(streams: usize) -> usize {
        (32 + 12 * streams).div_ceil(4096) * 4096
    }

    /// Encodes a slot.
    pub fn encode(seq: u64, durable: u64, ends: &[(u32, u64)]) -> Vec<u8> {
        let mut b = vec![0u8; slot_len(ends.len())];
        b[4..8].copy_from_slice(&(ends.len() as u32).to_le_bytes());
        b[8..16].copy_from_slice(&seq.to_le_bytes());
        b[16..24].copy_from_slice(&durable.to_le_bytes());
        for (i, &(seg, end)) in ends.iter().enumerate() {
            let at = 32 + 12 * i;
            b[at..at + 4].copy_from_slice(&seg.to_le_bytes());
            b[at + 4..at + 12].copy_from_slice(&end.to_le_bytes());
        }
        let n = 32 + 12 * ends.len();
        let crc = crc32c::crc32c(&b[4..n]);
        b[0..4].copy_from_slice(&crc.to_le_bytes());
        b
    }

    fn decode_slot(b: &[u8]) -> Option<(u64, Marker)> {
        if b.len() < 32 {
            return None;
        }
        let streams = super::u32le(b, 4) as usize;
        let n = 32usize.checked_add(streams.checked_mul(12)?)?;
        if n > b.len() || crc32c::crc32c(&b[4..n]) != super::u32le(b, 0) {
            return None;
        }
        let ends = (0..streams)
            .map(|i| (super::u32le(b, 32 + 12 * i), super::u64le(b, 36 + 12 * i)))
            .collect();
        Some((super::u64le(b, 8), Marker { durable: super::u64le(b, 16), ends }))
    }

    /// The marker in a marker file's contents (two slots of half its length each), or `None`
    /// if neither slot is valid.
    pub fn decode(file: &[u8]) -> Option<Marker> {
        let half = file.len() / 2;
        if half == 0 || file.len() % 2 != 0 {
            return None;
        }
        let a = decode_slot(&file[..half]);
        let b = decode_slot(&file[half..]);
        match (a, b) {
            (Some(a), Some(b)) => Some(if a.0 >= b.0 { a.1 } else { b.1 }),
            (Some((_, m)), None) | (None, Some((_, m))) => Some(m),
            (None, None) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_every_flipped_byte_is_caught() {
        let mut buf = Vec::new();
        encode_record(&mut buf, RecordKind::Txn, 2, 77, 5, &[]);
        encode_record(&mut buf, RecordKind::Put, 3, 77, 42, b"hello world");
        encode_record(&mut buf, RecordKind::Delete, 3, 77, 43, &[]);
        let (r, n) = decode_record(&buf).unwrap();
        assert_eq!((r.kind, r.table, r.stamp, r.key, n), (RecordKind::Txn, 2, 77, 5, 32));
        let (r, m) = decode_record(&buf[n..]).unwrap();
        assert_eq!(
            (r.kind, r.table, r.key, r.payload),
            (RecordKind::Put, 3, 42, &b"hello world"[..])
        );
        let (r, _) = decode_record(&buf[n + m..]).unwrap();
        assert_eq!((r.kind, r.key), (RecordKind::Delete, 43));
        // Every single-byte change of the PUT record is detected.
        for i in n..n + m {
            let mut bad = buf.clone();
            bad[i] ^= 0x40;
            assert!(decode_record(&bad[n..]).is_err(), "flip at byte {i} went unnoticed");
        }
        // Cut anywhere inside: truncated.
        for cut in n + 1..n + m {
            assert!(matches!(decode_record(&buf[n..cut]), Err(Bad::Truncated | Bad::Zero)));
        }
        assert_eq!(decode_record(&[0u8; 40]), Err(Bad::Zero));
    }

    #[test]
    fn skips_and_padded_txn_records_decode_and_their_damage_is_caught() {
        for len in [8, 16, 200] {
            let mut b = vec![0xAAu8; len];
            encode_skip(&mut b);
            let (r, n) = decode_record(&b).unwrap();
            assert_eq!((r.kind, n), (RecordKind::Skip, len));
            for i in 0..8 {
                let mut bad = b.clone();
                bad[i] ^= 0x10;
                assert!(decode_record(&bad).is_err(), "flip at byte {i} of a skip went unnoticed");
            }
            assert_eq!(decode_record(&b[..len - 1]).err(), Some(Bad::Truncated));
        }
        let mut buf = Vec::new();
        encode_record(&mut buf, RecordKind::Txn, 1, 5, 9, &[0; 7]);
        assert_eq!(decode_record(&buf).unwrap().1, 39);
        let mut bad = Vec::new();
        encode_record(&mut bad, RecordKind::Txn, 1, 5, 9, &[0, 1]);
        assert_eq!(decode_record(&bad), Err(Bad::Corrupt("payload on a record that has none")));
        bad.clear();
        encode_record(&mut bad, RecordKind::Delete, 1, 5, 9, &[0]);
        assert_eq!(decode_record(&bad), Err(Bad::Corrupt("payload on a record that has none")));
        // COLS: a mask, then the packed words.
        let mut cols = Vec::new();
        encode_record(&mut cols, RecordKind::Cols, 1, 5, 9, &[6, 0, 0, 0, 0, 0, 0, 0, 42]);
        let (r, _) = decode_record(&cols).unwrap();
        assert_eq!((r.kind, r.payload.len()), (RecordKind::Cols, 9));
        bad.clear();
        encode_record(&mut bad, RecordKind::Cols, 1, 5, 9, &[6, 0, 0]);
        assert_eq!(decode_record(&bad), Err(Bad::Corrupt("written columns without their mask")));
    }

    #[test]
    fn the_fingerprint_covers_the_column_layout() {
        let plain = TableSpec::new("t", 16, 10);
        let with = |len| TableSpec::new("t", 16, 10).with_columns(&[("a", 0, 8), ("b", 8, len)]);
        assert_ne!(fingerprint(std::slice::from_ref(&plain)), fingerprint(&[with(8)]));
        assert_ne!(fingerprint(&[with(8)]), fingerprint(&[with(4)]));
        assert_eq!(fingerprint(&[with(8)]), fingerprint(&[with(8)]));
    }

    #[test]
    fn headers_check_magic_version_and_schema() {
        let h = SegmentHeader { kind: FileKind::Log, fingerprint: 9, stream: 3, seq: 7, aux: 0 };
        let b = h.encode();
        assert_eq!(SegmentHeader::decode(&b, 9), Ok(h));
        assert!(SegmentHeader::decode(&b, 8).unwrap_err().starts_with("schema mismatch"));
        let mut v1 = b;
        v1[8] = 1;
        let crc = crc32c::crc32c(&v1[..60]);
        v1[60..].copy_from_slice(&crc.to_le_bytes());
        assert!(SegmentHeader::decode(&v1, 9).unwrap_err().contains("format version 1"));
        let mut bad = b;
        bad[30] ^= 1;
        assert_eq!(SegmentHeader::decode(&bad, 9).unwrap_err(), "segment header checksum mismatch");
    }

    #[test]
    fn the_marker_keeps_the_newest_valid_slot() {
        let ends = [(3, 100), marker::NONE];
        let slot = marker::slot_len(2);
        let mut f = vec![0u8; 2 * slot];
        assert_eq!(marker::decode(&f), None);
        f[slot..].copy_from_slice(&marker::encode(1, 10, &ends));
        assert_eq!(marker::decode(&f).map(|m| m.durable), Some(10));
        f[..slot].copy_from_slice(&marker::encode(2, 12, &[(3, 200), (0, 64)]));
        let m = marker::decode(&f).unwrap();
        assert_eq!((m.durable, m.ends), (12, vec![(3, 200), (0, 64)]));
        f[20] ^= 1; // slot 0 torn: slot 1 still answers
        assert_eq!(marker::decode(&f), Some(marker::Marker { durable: 10, ends: ends.to_vec() }));
    }

    #[test]
    fn fingerprints_differ_by_name_and_row_size() {
        let a = [TableSpec::new("a", 8, 1)];
        let b = [TableSpec::new("a", 16, 1)];
        let c = [TableSpec::new("b", 8, 1)];
        assert_ne!(fingerprint(&a), fingerprint(&b));
        assert_ne!(fingerprint(&a), fingerprint(&c));
        assert_eq!(fingerprint(&a), fingerprint(&[TableSpec::new("a", 8, 1000)]));
    }
}
