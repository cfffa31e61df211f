//! Trial records as Apache Parquet, written and read without a Parquet library.
//!
//! Why hand-written: polars' `parquet` feature (polars-io) switches on every compression codec
//! (zstd-sys and lz4-sys are C builds, plus brotli, snappy, flate2) and recompiles the polars
//! stack with more features; measured here it added well over a minute of cold build on 2
//! cores. Trial records need very little of the format, and what svc writes is the most
//! portable subset every reader supports (DuckDB, polars, pyarrow, Spark):
//!
//! - one flat schema, one column per record field, in the record's field order: strings are
//!   `BYTE_ARRAY` annotated `UTF8`, counts `INT64` annotated `UINT_64` (they are unsigned
//!   64-bit), numbers `DOUBLE`; the four nullable
//!   fields are `OPTIONAL`, the rest `REQUIRED`;
//! - row groups of [`ROW_GROUP_ROWS`] rows, one uncompressed v1 data page per column chunk,
//!   `PLAIN` values, definition levels in the RLE/bit-packed hybrid encoding;
//! - metadata in the Thrift compact protocol, as the format specifies.
//!
//! The reader reads that subset (any row-group and page count, RLE or bit-packed levels) and
//! names what it cannot read (a compression codec, dictionary pages, nested columns), so a file
//! rewritten by another tool fails clearly instead of being misread.

use serde_json::{Map, Value};

use super::TrialRecord;

/// Rows per row group.
pub const ROW_GROUP_ROWS: usize = 65_536;

const MAGIC: &[u8; 4] = b"PAR1";

/// The physical type of a column, as Parquet numbers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    /// BYTE_ARRAY with the UTF8 annotation.
    Utf8,
    Int64,
    /// INT64 annotated `UINT_64`: a record's counts are unsigned 64-bit, and as plain INT64 a
    /// count of 2^63 or more was written as 0 without a word.
    UInt64,
    Double,
}

/// Parquet's `ConvertedType` numbers of the annotations svc writes.
const CONVERTED_UTF8: i64 = 0;
const CONVERTED_UINT_64: i64 = 14;

impl ColumnType {
    fn physical(self) -> i32 {
        match self {
            ColumnType::Utf8 => 6,
            ColumnType::Int64 | ColumnType::UInt64 => 2,
            ColumnType::Double => 5,
        }
    }
}

/// The trial record's columns: (name, type, nullable), in field order.
pub const RECORD_COLUMNS: [(&str, ColumnType, bool); 27] = [
    ("schema_version", ColumnType::Utf8, false),
    ("workload", ColumnType::Utf8, false),
    ("workload_version", ColumnType::Utf8, false),
    ("task_id", ColumnType::Utf8, false),
    ("provider", ColumnType::Utf8, false),
    ("model", ColumnType::Utf8, false),
    ("provider_request_id", ColumnType::Utf8, false),
    ("usage_source", ColumnType::Utf8, false),
    ("cost_source", ColumnType::Utf8, false),
    ("cost_source_reference", ColumnType::Utf8, false),
    ("outcome", ColumnType::Utf8, false),
    ("error_type", ColumnType::Utf8, true),
    ("context_sha256", ColumnType::Utf8, false),
    ("response_text", ColumnType::Utf8, true),
    ("response_sha256", ColumnType::Utf8, true),
    ("replicate", ColumnType::UInt64, false),
    ("condition", ColumnType::Utf8, false),
    ("scorer", ColumnType::Utf8, false),
    ("task_score", ColumnType::Double, false),
    ("evidence_recall", ColumnType::Double, false),
    ("unsupported_claim_rate", ColumnType::Double, false),
    ("context_tokens", ColumnType::UInt64, false),
    ("reasoning_tokens", ColumnType::UInt64, false),
    ("output_tokens", ColumnType::UInt64, false),
    ("billed_cost_usd", ColumnType::Double, false),
    ("latency_ms", ColumnType::Double, false),
    ("context_commit_id", ColumnType::Utf8, true),
];

/// The reader's own code for an INT64 column annotated `UINT_64` (not a Parquet number).
const UNSIGNED_INT64: i32 = -2;

/// Why a Parquet file could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("Parquet: {0}")]
pub struct ParquetError(pub String);

fn bad(message: impl Into<String>) -> ParquetError {
    ParquetError(message.into())
}

/// Encodes `records` as one Parquet file.
pub fn write_records(records: &[TrialRecord]) -> Vec<u8> {
    let rows: Vec<Map<String, Value>> = records
        .iter()
        .map(|record| match serde_json::to_value(record) {
            Ok(Value::Object(map)) => map,
            // A TrialRecord always serialises to an object.
            _ => Map::new(),
        })
        .collect();
    write_table(&RECORD_COLUMNS, &rows, ROW_GROUP_ROWS)
}

/// Encodes `rows` (JSON objects) under `columns`. A missing or mistyped value is written as
/// null in a nullable column and as the type's zero otherwise; callers pass validated rows.
/// Row groups hold `group_rows` rows.
pub fn write_table(
    columns: &[(&str, ColumnType, bool)],
    rows: &[Map<String, Value>],
    group_rows: usize,
) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    let mut groups = Vec::new();
    for chunk in rows.chunks(group_rows.max(1)) {
        let mut chunks = Vec::new();
        let mut group_bytes = 0i64;
        for &(name, kind, nullable) in columns {
            let values: Vec<Option<&Value>> = chunk
                .iter()
                .map(|row| row.get(name).filter(|v| !v.is_null()))
                .collect();
            let mut body = Vec::new();
            if nullable {
                let levels: Vec<u8> = values.iter().map(|v| u8::from(v.is_some())).collect();
                let encoded = rle_levels(&levels);
                body.extend_from_slice(&(encoded.len() as u32).to_le_bytes());
                body.extend_from_slice(&encoded);
            }
            for value in &values {
                match (kind, value) {
                    (_, None) if nullable => {}
                    (ColumnType::Utf8, v) => {
                        let text = v.and_then(|v| v.as_str()).unwrap_or_default();
                        body.extend_from_slice(&(text.len() as u32).to_le_bytes());
                        body.extend_from_slice(text.as_bytes());
                    }
                    (ColumnType::Int64, v) => {
                        let n = v.and_then(|v| v.as_i64()).unwrap_or_default();
                        body.extend_from_slice(&n.to_le_bytes());
                    }
                    (ColumnType::UInt64, v) => {
                        let n = v.and_then(|v| v.as_u64()).unwrap_or_default();
                        body.extend_from_slice(&n.to_le_bytes());
                    }
                    (ColumnType::Double, v) => {
                        let x = v.and_then(|v| v.as_f64()).unwrap_or_default();
                        body.extend_from_slice(&x.to_le_bytes());
                    }
                }
            }
            let mut header = Thrift::default();
            header.struct_begin();
            header.i32_field(1, 0); // DATA_PAGE
            header.i32_field(2, body.len() as i32);
            header.i32_field(3, body.len() as i32);
            header.field(5, STRUCT);
            header.struct_begin();
            header.i32_field(1, chunk.len() as i32);
            header.i32_field(2, 0); // PLAIN
            header.i32_field(3, 3); // RLE
            header.i32_field(4, 3); // RLE
            header.struct_end();
            header.struct_end();
            let offset = out.len() as i64;
            let size = (header.bytes.len() + body.len()) as i64;
            out.extend_from_slice(&header.bytes);
            out.extend_from_slice(&body);
            group_bytes += size;
            chunks.push((name, kind, offset, size, chunk.len() as i64));
        }
        groups.push((chunks, group_bytes, chunk.len() as i64));
    }
    let mut meta = Thrift::default();
    meta.struct_begin();
    meta.i32_field(1, 1);
    meta.field(2, LIST);
    meta.list_begin(STRUCT, columns.len() + 1);
    meta.struct_begin();
    meta.binary_field(4, b"schema");
    meta.i32_field(5, columns.len() as i32);
    meta.struct_end();
    for &(name, kind, nullable) in columns {
        meta.struct_begin();
        meta.i32_field(1, kind.physical());
        meta.i32_field(3, i32::from(nullable));
        meta.binary_field(4, name.as_bytes());
        match kind {
            ColumnType::Utf8 => meta.i32_field(6, CONVERTED_UTF8 as i32),
            ColumnType::UInt64 => meta.i32_field(6, CONVERTED_UINT_64 as i32),
            ColumnType::Int64 | ColumnType::Double => {}
        }
        meta.struct_end();
    }
    meta.i64_field(3, rows.len() as i64);
    meta.field(4, LIST);
    meta.list_begin(STRUCT, groups.len());
    for (chunks, bytes, count) in &groups {
        meta.struct_begin();
        meta.field(1, LIST);
        meta.list_begin(STRUCT, chunks.len());
        for (name, kind, offset, size, values) in chunks {
            meta.struct_begin();
            meta.i64_field(2, *offset);
            meta.field(3, STRUCT);
            meta.struct_begin();
            meta.i32_field(1, kind.physical());
            meta.field(2, LIST);
            meta.list_begin(I32, 2);
            meta.varint(zigzag(0)); // PLAIN
            meta.varint(zigzag(3)); // RLE
            meta.field(3, LIST);
            meta.list_begin(BINARY, 1);
            meta.binary(name.as_bytes());
            meta.i32_field(4, 0); // UNCOMPRESSED
            meta.i64_field(5, *values);
            meta.i64_field(6, *size);
            meta.i64_field(7, *size);
            meta.i64_field(9, *offset);
            meta.struct_end();
            meta.struct_end();
        }
        meta.i64_field(2, *bytes);
        meta.i64_field(3, *count);
        meta.struct_end();
    }
    meta.binary_field(
        6,
        concat!("svc version ", env!("CARGO_PKG_VERSION")).as_bytes(),
    );
    meta.struct_end();
    out.extend_from_slice(&meta.bytes);
    out.extend_from_slice(&(meta.bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(MAGIC);
    out
}

/// Definition levels (0/1) in the RLE/bit-packed hybrid encoding, as RLE runs.
fn rle_levels(levels: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < levels.len() {
        let value = levels[i];
        let run = levels[i..].iter().take_while(|&&l| l == value).count();
        let mut header = Thrift::default();
        header.varint((run as u64) << 1);
        out.extend_from_slice(&header.bytes);
        out.push(value);
        i += run;
    }
    out
}

// Thrift compact protocol type ids.
const I32: u8 = 5;
const I64: u8 = 6;
const BINARY: u8 = 8;
const LIST: u8 = 9;
const STRUCT: u8 = 12;

fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

/// A Thrift compact-protocol encoder.
#[derive(Default)]
struct Thrift {
    bytes: Vec<u8>,
    last: Vec<i16>,
}

impl Thrift {
    fn varint(&mut self, mut n: u64) {
        while n >= 0x80 {
            self.bytes.push((n as u8) | 0x80);
            n >>= 7;
        }
        self.bytes.push(n as u8);
    }
    fn field(&mut self, id: i16, kind: u8) {
        let last = self.last.last().copied().unwrap_or(0);
        let delta = id - last;
        if (1..=15).contains(&delta) {
            self.bytes.push(((delta as u8) << 4) | kind);
        } else {
            self.bytes.push(kind);
            self.varint(zigzag(i64::from(id)));
        }
        if let Some(top) = self.last.last_mut() {
            *top = id;
        }
    }
    fn struct_begin(&mut self) {
        self.last.push(0);
    }
    fn struct_end(&mut self) {
        self.bytes.push(0);
        self.last.pop();
    }
    fn list_begin(&mut self, kind: u8, size: usize) {
        if size < 15 {
            self.bytes.push(((size as u8) << 4) | kind);
        } else {
            self.bytes.push(0xF0 | kind);
            self.varint(size as u64);
        }
    }
    fn binary(&mut self, bytes: &[u8]) {
        self.varint(bytes.len() as u64);
        self.bytes.extend_from_slice(bytes);
    }
    fn i32_field(&mut self, id: i16, value: i32) {
        self.field(id, I32);
        self.varint(zigzag(i64::from(value)));
    }
    fn i64_field(&mut self, id: i16, value: i64) {
        self.field(id, I64);
        self.varint(zigzag(value));
    }
    fn binary_field(&mut self, id: i16, value: &[u8]) {
        self.field(id, BINARY);
        self.binary(value);
    }
}

/// A decoded Thrift value.
#[derive(Debug, Clone)]
enum TValue {
    Int(i64),
    Binary(Vec<u8>),
    List(Vec<TValue>),
    Struct(Vec<(i16, TValue)>),
    Other,
}

impl TValue {
    fn get(&self, id: i16) -> Option<&TValue> {
        match self {
            TValue::Struct(fields) => fields.iter().find(|(f, _)| *f == id).map(|(_, v)| v),
            _ => None,
        }
    }
    fn int(&self, id: i16) -> Option<i64> {
        match self.get(id)? {
            TValue::Int(n) => Some(*n),
            _ => None,
        }
    }
    fn list(&self, id: i16) -> &[TValue] {
        match self.get(id) {
            Some(TValue::List(items)) => items,
            _ => &[],
        }
    }
    fn text(&self, id: i16) -> Option<String> {
        match self.get(id)? {
            TValue::Binary(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
            _ => None,
        }
    }
}

/// A Thrift compact-protocol decoder over a byte slice.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn byte(&mut self) -> Result<u8, ParquetError> {
        let byte = *self
            .bytes
            .get(self.at)
            .ok_or_else(|| bad("metadata ends early"))?;
        self.at += 1;
        Ok(byte)
    }
    fn varint(&mut self) -> Result<u64, ParquetError> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.byte()?;
            n |= u64::from(byte & 0x7F) << shift;
            if byte & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(bad("a varint is too long"))
    }
    fn zigzag(&mut self) -> Result<i64, ParquetError> {
        let n = self.varint()?;
        Ok(((n >> 1) as i64) ^ -((n & 1) as i64))
    }
    fn take(&mut self, len: usize) -> Result<&'a [u8], ParquetError> {
        let end = self
            .at
            .checked_add(len)
            .filter(|&end| end <= self.bytes.len())
            .ok_or_else(|| bad("a value runs past the end"))?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }
    fn value(&mut self, kind: u8, depth: usize) -> Result<TValue, ParquetError> {
        if depth > 32 {
            return Err(bad("metadata nests too deeply"));
        }
        Ok(match kind {
            1 => TValue::Int(1),
            2 => TValue::Int(0),
            3 => TValue::Int(i64::from(self.byte()? as i8)),
            4..=6 => TValue::Int(self.zigzag()?),
            7 => {
                self.take(8)?;
                TValue::Other
            }
            8 => {
                let len = self.varint()? as usize;
                TValue::Binary(self.take(len)?.to_vec())
            }
            9 | 10 => {
                let header = self.byte()?;
                let size = match header >> 4 {
                    15 => self.varint()? as usize,
                    n => n as usize,
                };
                let element = header & 0x0F;
                let mut items = Vec::with_capacity(size.min(1 << 16));
                for _ in 0..size {
                    // Booleans inside lists are one byte each.
                    items.push(if element == 1 || element == 2 {
                        TValue::Int(i64::from(self.byte()? == 1))
                    } else {
                        self.value(element, depth + 1)?
                    });
                }
                TValue::List(items)
            }
            11 => {
                let size = self.varint()? as usize;
                if size > 0 {
                    let kinds = self.byte()?;
                    for _ in 0..size {
                        self.value(kinds >> 4, depth + 1)?;
                        self.value(kinds & 0x0F, depth + 1)?;
                    }
                }
                TValue::Other
            }
            12 => self.structure(depth + 1)?,
            other => return Err(bad(format!("unknown Thrift type {other}"))),
        })
    }
    fn structure(&mut self, depth: usize) -> Result<TValue, ParquetError> {
        let mut fields = Vec::new();
        let mut last = 0i16;
        loop {
            let header = self.byte()?;
            if header == 0 {
                return Ok(TValue::Struct(fields));
            }
            let kind = header & 0x0F;
            let id = match header >> 4 {
                0 => self.zigzag()? as i16,
                delta => last + i16::from(delta),
            };
            last = id;
            fields.push((id, self.value(kind, depth)?));
        }
    }
}

/// Decodes `levels` definition levels (bit width 1) of the RLE/bit-packed hybrid encoding.
fn decode_levels(bytes: &[u8], count: usize) -> Result<Vec<u8>, ParquetError> {
    let mut reader = Reader { bytes, at: 0 };
    let mut levels = Vec::with_capacity(count);
    while levels.len() < count {
        let header = reader.varint()?;
        if header & 1 == 0 {
            let run = (header >> 1) as usize;
            let value = reader.byte()?;
            levels.extend(std::iter::repeat_n(value, run.min(count - levels.len())));
        } else {
            let groups = (header >> 1) as usize;
            for byte in reader.take(groups)? {
                for bit in 0..8 {
                    if levels.len() < count {
                        levels.push((byte >> bit) & 1);
                    }
                }
            }
        }
    }
    Ok(levels)
}

/// Reads a Parquet file of the subset svc writes into JSON rows, one object per row with every
/// column in schema order (nulls included).
pub fn read_rows(bytes: &[u8]) -> Result<Vec<Map<String, Value>>, ParquetError> {
    let len = bytes.len();
    if len < 12 || &bytes[..4] != MAGIC || &bytes[len - 4..] != MAGIC {
        return Err(bad("not a Parquet file (no PAR1 magic at both ends)"));
    }
    let footer = u32::from_le_bytes([
        bytes[len - 8],
        bytes[len - 7],
        bytes[len - 6],
        bytes[len - 5],
    ]) as usize;
    let start = (len - 8)
        .checked_sub(footer)
        .filter(|&s| s >= 4)
        .ok_or_else(|| bad("the footer length is larger than the file"))?;
    let meta = Reader {
        bytes: &bytes[start..len - 8],
        at: 0,
    }
    .structure(0)?;
    let schema = meta.list(2);
    let mut columns: Vec<(String, i32, bool)> = Vec::new();
    for element in schema.iter().skip(1) {
        let name = element.text(4).unwrap_or_default();
        if element.int(5).is_some_and(|n| n > 0) {
            return Err(bad(format!(
                "column {name} is nested; only flat records are read"
            )));
        }
        let repetition = element.int(3).unwrap_or(0);
        if repetition == 2 {
            return Err(bad(format!(
                "column {name} is repeated; only flat records are read"
            )));
        }
        let physical = element.int(1).unwrap_or(-1) as i32;
        // INT64 annotated UINT_64 holds unsigned values: read them as such.
        let physical = if physical == 2 && element.int(6) == Some(CONVERTED_UINT_64) {
            UNSIGNED_INT64
        } else {
            physical
        };
        columns.push((name, physical, repetition == 1));
    }
    let mut rows: Vec<Map<String, Value>> = Vec::new();
    for group in meta.list(4) {
        let count = group.int(3).unwrap_or(0).max(0) as usize;
        let base = rows.len();
        rows.extend((0..count).map(|_| Map::new()));
        let chunks = group.list(1);
        if chunks.len() != columns.len() {
            return Err(bad("a row group's column count differs from the schema"));
        }
        for (chunk, (name, physical, nullable)) in chunks.iter().zip(&columns) {
            let column = chunk
                .get(3)
                .ok_or_else(|| bad(format!("column {name} has no metadata")))?;
            let codec = column.int(4).unwrap_or(0);
            if codec != 0 {
                return Err(bad(format!(
                    "column {name} is compressed (codec {codec}); svc reads uncompressed Parquet as `svc records export` writes it: re-export, or convert to JSON Lines (e.g. DuckDB: COPY (SELECT * FROM 'file.parquet') TO 'file.jsonl')"
                )));
            }
            if column.get(11).is_some() {
                return Err(bad(format!(
                    "column {name} is dictionary-encoded; svc reads PLAIN-encoded Parquet as `svc records export` writes it"
                )));
            }
            let mut at = column.int(9).unwrap_or(0).max(0) as usize;
            let mut values: Vec<Value> = Vec::with_capacity(count);
            while values.len() < count {
                let mut reader = Reader {
                    bytes: bytes.get(..start).unwrap_or_default(),
                    at,
                };
                let header = reader.structure(0)?;
                let size = header.int(3).unwrap_or(0).max(0) as usize;
                let body = reader.take(size)?;
                at = reader.at;
                if header.int(1) != Some(0) {
                    return Err(bad(format!(
                        "column {name} has a page of type {:?}; svc reads v1 data pages",
                        header.int(1)
                    )));
                }
                let page = header
                    .get(5)
                    .ok_or_else(|| bad(format!("column {name}: a data page has no header")))?;
                if page.int(2) != Some(0) {
                    return Err(bad(format!(
                        "column {name} is not PLAIN-encoded; svc reads PLAIN values"
                    )));
                }
                let page_values = page.int(1).unwrap_or(0).max(0) as usize;
                let mut body = Reader { bytes: body, at: 0 };
                let levels = if *nullable {
                    let size = u32::from_le_bytes(
                        body.take(4)?
                            .try_into()
                            .map_err(|_| bad("short level length"))?,
                    ) as usize;
                    decode_levels(body.take(size)?, page_values)?
                } else {
                    vec![1; page_values]
                };
                for level in levels {
                    if level == 0 {
                        values.push(Value::Null);
                        continue;
                    }
                    values.push(match *physical {
                        6 => {
                            let size = u32::from_le_bytes(
                                body.take(4)?.try_into().map_err(|_| bad("short length"))?,
                            ) as usize;
                            let text = std::str::from_utf8(body.take(size)?).map_err(|_| {
                                bad(format!("column {name} holds a value that is not UTF-8"))
                            })?;
                            Value::String(text.to_string())
                        }
                        2 => Value::from(i64::from_le_bytes(
                            body.take(8)?.try_into().map_err(|_| bad("short value"))?,
                        )),
                        UNSIGNED_INT64 => Value::from(u64::from_le_bytes(
                            body.take(8)?.try_into().map_err(|_| bad("short value"))?,
                        )),
                        5 => Value::from(f64::from_le_bytes(
                            body.take(8)?.try_into().map_err(|_| bad("short value"))?,
                        )),
                        other => {
                            return Err(bad(format!(
                                "column {name} has physical type {other}; svc reads strings, INT64 and DOUBLE"
                            )));
                        }
                    });
                }
            }
            for (row, value) in rows[base..].iter_mut().zip(values) {
                row.insert(name.clone(), value);
            }
        }
    }
    Ok(rows)
}

/// Whether `path` names a Parquet file (by extension).
pub fn is_parquet(path: &std::path::Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("parquet"))
}

/// The rows of a Parquet file as raw records (JSON text), numbered by row from 1 in `line`,
/// for the same validation path as JSON Lines.
pub fn raw_records(bytes: &[u8]) -> Result<Vec<super::read::RawRecord>, ParquetError> {
    Ok(read_rows(bytes)?
        .into_iter()
        .enumerate()
        .map(|(index, row)| super::read::RawRecord {
            line: index + 1,
            text: serde_json::to_string(&Value::Object(row)).map_err(|e| e.to_string()),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trial::{Condition, CostSource, Outcome, UsageSource};

    fn record(i: u64, success: bool) -> TrialRecord {
        let text = format!("answer {i} — ünïcode");
        TrialRecord {
            schema_version: crate::trial::SCHEMA_VERSION.into(),
            workload: "w".into(),
            workload_version: "1".into(),
            task_id: format!("t{i}@b512"),
            provider: "p".into(),
            model: "m".into(),
            provider_request_id: format!("id{i}"),
            usage_source: UsageSource::DeterministicFixture,
            cost_source: CostSource::ZeroCostFixture,
            cost_source_reference: "zero_cost_fixture".into(),
            outcome: if success {
                Outcome::Success
            } else {
                Outcome::Error
            },
            error_type: (!success).then(|| "http_500".into()),
            context_sha256: "a".repeat(64),
            response_sha256: success.then(|| crate::digest::sha256_hex(&text)),
            response_text: success.then_some(text),
            replicate: i % 3,
            condition: if success {
                Condition::Svc
            } else {
                Condition::Raw
            },
            scorer: "exact_match".into(),
            task_score: 0.25 * (i % 5) as f64,
            evidence_recall: 1.0,
            unsupported_claim_rate: 0.0,
            context_tokens: 100 + i,
            reasoning_tokens: 0,
            output_tokens: 3,
            billed_cost_usd: 0.0,
            latency_ms: 0.125 * i as f64,
            context_commit_id: success.then(|| format!("ctx_{i}")),
        }
    }

    #[test]
    fn records_round_trip_across_row_groups_with_nulls() {
        let records: Vec<TrialRecord> = (0..250).map(|i| record(i, i % 7 != 0)).collect();
        let rows: Vec<Map<String, Value>> = records
            .iter()
            .map(|r| match serde_json::to_value(r).expect("json") {
                Value::Object(map) => map,
                _ => unreachable!("a record is an object"),
            })
            .collect();
        let bytes = write_table(&RECORD_COLUMNS, &rows, 100);
        let rows = read_rows(&bytes).expect("read");
        assert_eq!(rows.len(), records.len());
        for (row, record) in rows.iter().zip(&records) {
            let back: TrialRecord =
                serde_json::from_value(Value::Object(row.clone())).expect("a valid record");
            assert_eq!(&back, record);
        }
        let names: Vec<&String> = rows[0].keys().collect();
        assert_eq!(names.len(), RECORD_COLUMNS.len());
    }

    /// Regression (found by probing): counts of 2^63 or more (valid records: counts are
    /// unsigned 64-bit) were written as 0 without a word.
    #[test]
    fn counts_past_the_signed_range_round_trip() {
        let mut big = record(1, true);
        big.output_tokens = u64::MAX;
        big.context_tokens = 1 << 63;
        let back = read_rows(&write_records(std::slice::from_ref(&big))).expect("read");
        let back: TrialRecord =
            serde_json::from_value(Value::Object(back[0].clone())).expect("a valid record");
        assert_eq!(back, big);
    }

    #[test]
    fn what_cannot_be_read_is_named() {
        assert!(read_rows(b"not parquet").is_err());
        let mut bytes = write_records(&[record(1, true)]);
        let len = bytes.len();
        bytes[len - 5] = 0xFF;
        assert!(read_rows(&bytes).is_err(), "a footer past the start");
        assert!(read_rows(&write_records(&[])).expect("empty").is_empty());
    }

    #[test]
    fn levels_decode_both_run_kinds() {
        // An RLE run of three 1s, then one bit-packed group 0b0000_0101.
        let bytes = [3 << 1, 1, (1 << 1) | 1, 0b0000_0101];
        assert_eq!(
            decode_levels(&bytes, 11).expect("levels"),
            vec![1, 1, 1, 1, 0, 1, 0, 0, 0, 0, 0]
        );
        assert_eq!(rle_levels(&[1, 1, 0]), vec![2 << 1, 1, 1 << 1, 0]);
    }
}
