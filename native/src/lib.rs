//! Iceberg manifest decoding: Avro object container bytes -> Arrow buffers, per column.
//!
//! The writer schema in the file's header drives the decoding. Each column of the top-level
//! record becomes a tree of buffers (validity bitmap, offsets, values), handed to `pyarrow`
//! as one record batch through the Arrow C Data Interface (`arrow_c`) with the types
//! `polars.read_avro(...).to_arrow()` gives, so the two paths yield equal tables. A schema holding a type outside the handled set is
//! reported as such before any record is read (the caller then decodes another way); damaged
//! bytes are an error naming what is wrong, never a panic or a read out of bounds.

use std::collections::HashMap;

mod arrow_c;

use libdeflater::{DecompressionError, Decompressor};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use serde_json::Value;

#[cfg(target_endian = "big")]
compile_error!(
    "the manifest decoder writes Arrow buffers in the machine's byte order: little-endian only"
);

const MAGIC: &[u8; 4] = b"Obj\x01";
/// Inflated bytes of one block at most: a manifest block is kilobytes to a few megabytes.
const MAX_INFLATED: usize = 1 << 30;

type Res<T> = Result<T, String>;

// ---------------------------------------------------------------------------------------------
// schema

#[derive(Clone, Copy, PartialEq)]
enum IntOut {
    I32,
    Date,
    TimeMillis,
}

#[derive(Clone, Copy, PartialEq)]
enum LongOut {
    I64,
    TsMicrosUtc,
    TsMillisUtc,
    TsMicrosLocal,
    TimeMicros,
}

#[derive(Clone)]
enum Ty {
    Bool,
    Int(IntOut),
    Long(LongOut),
    Float,
    Double,
    Str,
    Bytes,
    Fixed(usize),
    DecBytes(u32, u32),
    DecFixed(usize, u32, u32),
    /// Items, and the fewest bytes one takes.
    Array(Box<Node>, u64),
    Record(Vec<(String, Node)>),
    /// An array field read past: each value kept as null or as an empty array (a plan that
    /// reads no metrics asks for the entries without the maps' items).
    Skip(Box<Node>),
}

#[derive(Clone)]
struct Node {
    ty: Ty,
    /// A union with null: the branch index that is null (the other one holds `ty`).
    null_branch: Option<i64>,
}

impl Node {
    /// The fewest bytes one value takes: bounds the item counts a block may announce.
    fn min_size(&self) -> u64 {
        if self.null_branch.is_some() {
            return 1;
        }
        match &self.ty {
            Ty::Bool
            | Ty::Int(_)
            | Ty::Long(_)
            | Ty::Str
            | Ty::Bytes
            | Ty::DecBytes(..)
            | Ty::Array(..) => 1,
            Ty::Float => 4,
            Ty::Double => 8,
            Ty::Fixed(n) | Ty::DecFixed(n, ..) => *n as u64,
            Ty::Record(fields) => fields.iter().map(|(_, f)| f.min_size()).sum(),
            Ty::Skip(inner) => inner.min_size(),
        }
    }
}

/// Why a schema is not decoded here: `Unsupported` (decode another way) or `Invalid` (damage).
enum SchemaErr {
    Unsupported(String),
    Invalid(String),
}

fn invalid<T>(what: impl Into<String>) -> Result<T, SchemaErr> {
    Err(SchemaErr::Invalid(what.into()))
}

/// The name a record or fixed must have.
fn type_name(o: &serde_json::Map<String, Value>) -> Result<&str, SchemaErr> {
    match o.get("name").and_then(Value::as_str) {
        Some(name) if !name.is_empty() => Ok(name),
        _ => invalid("a named type without a name"),
    }
}

struct SchemaParser {
    named: HashMap<String, Node>,
}

fn unsupported<T>(what: impl Into<String>) -> Result<T, SchemaErr> {
    Err(SchemaErr::Unsupported(what.into()))
}

impl SchemaParser {
    fn parse(&mut self, v: &Value, namespace: &str) -> Result<Node, SchemaErr> {
        match v {
            Value::String(name) => self.named_or_primitive(name, namespace),
            Value::Array(branches) => {
                if branches.len() != 2 {
                    return unsupported("a union that is not [null, T]");
                }
                let is_null = |b: &Value| match b {
                    Value::String(s) => s == "null",
                    Value::Object(o) => {
                        o.get("type") == Some(&Value::String("null".into())) && o.len() == 1
                    }
                    _ => false,
                };
                let (null_at, other) = match (is_null(&branches[0]), is_null(&branches[1])) {
                    (true, false) => (0, &branches[1]),
                    (false, true) => (1, &branches[0]),
                    _ => return unsupported("a union that is not [null, T]"),
                };
                let inner = self.parse(other, namespace)?;
                if inner.null_branch.is_some() {
                    return unsupported("a nested union");
                }
                Ok(Node {
                    ty: inner.ty,
                    null_branch: Some(null_at),
                })
            }
            Value::Object(o) => self.complex(o, namespace),
            _ => unsupported("a schema that is neither a name, a union nor an object"),
        }
    }

    fn named_or_primitive(&mut self, name: &str, namespace: &str) -> Result<Node, SchemaErr> {
        let ty = match name {
            "boolean" => Ty::Bool,
            "int" => Ty::Int(IntOut::I32),
            "long" => Ty::Long(LongOut::I64),
            "float" => Ty::Float,
            "double" => Ty::Double,
            "string" => Ty::Str,
            "bytes" => Ty::Bytes,
            _ => {
                let full = if name.contains('.') || namespace.is_empty() {
                    name.to_string()
                } else {
                    format!("{namespace}.{name}")
                };
                return match self.named.get(&full).or_else(|| self.named.get(name)) {
                    Some(node) => Ok(node.clone()),
                    None => unsupported(format!("type {name}")),
                };
            }
        };
        Ok(Node {
            ty,
            null_branch: None,
        })
    }

    fn register(
        &mut self,
        o: &serde_json::Map<String, Value>,
        namespace: &str,
        node: &Node,
    ) -> Result<(), SchemaErr> {
        let name = type_name(o)?;
        let ns = o
            .get("namespace")
            .and_then(Value::as_str)
            .unwrap_or(namespace);
        let full = if name.contains('.') || ns.is_empty() {
            name.to_string()
        } else {
            format!("{ns}.{name}")
        };
        if self.named.insert(full.clone(), node.clone()).is_some() {
            return invalid(format!("type {full} defined twice"));
        }
        if full != name {
            self.named.insert(name.to_string(), node.clone());
        }
        Ok(())
    }

    fn complex(
        &mut self,
        o: &serde_json::Map<String, Value>,
        namespace: &str,
    ) -> Result<Node, SchemaErr> {
        let base = match o.get("type") {
            Some(Value::String(s)) => s.as_str(),
            Some(other) if o.get("logicalType").is_none() => return self.parse(other, namespace),
            _ => return unsupported("a type object without a type name"),
        };
        let logical = o.get("logicalType").and_then(Value::as_str);
        let node = |ty| {
            Ok(Node {
                ty,
                null_branch: None,
            })
        };
        match (base, logical) {
            ("record", _) => {
                let name = type_name(o)?;
                let ns = o
                    .get("namespace")
                    .and_then(Value::as_str)
                    .unwrap_or(namespace);
                let inner_ns = if name.contains('.') {
                    name[..name.rfind('.').unwrap_or(0)].to_string()
                } else {
                    ns.to_string()
                };
                let Some(Value::Array(fields)) = o.get("fields") else {
                    return invalid("a record without fields");
                };
                let mut out = Vec::with_capacity(fields.len());
                for f in fields {
                    let (Some(fname), Some(ftype)) =
                        (f.get("name").and_then(Value::as_str), f.get("type"))
                    else {
                        return invalid("a record field without a name or type");
                    };
                    out.push((fname.to_string(), self.parse(ftype, &inner_ns)?));
                }
                let n = Node {
                    ty: Ty::Record(out),
                    null_branch: None,
                };
                self.register(o, namespace, &n)?;
                Ok(n)
            }
            ("array", None) | ("array", Some("map")) => {
                let Some(items) = o.get("items") else {
                    return unsupported("an array without items");
                };
                let item = self.parse(items, namespace)?;
                let min = item.min_size();
                if min == 0 {
                    // items of no bytes: a count alone could ask for any number
                    return unsupported("an array of items that take no bytes");
                }
                node(Ty::Array(Box::new(item), min))
            }
            ("fixed", l) => {
                let Some(size) = o.get("size").and_then(Value::as_u64) else {
                    return invalid("a fixed without a size");
                };
                let size = size as usize;
                let ty = match l {
                    None | Some("uuid") => Ty::Fixed(size),
                    Some("decimal") => {
                        let (p, s) = decimal_params(o)?;
                        if size == 0 || size > 16 {
                            return unsupported("a decimal wider than 16 bytes");
                        }
                        Ty::DecFixed(size, p, s)
                    }
                    Some(other) => return unsupported(format!("logical type {other} on fixed")),
                };
                let n = Node {
                    ty,
                    null_branch: None,
                };
                self.register(o, namespace, &n)?;
                Ok(n)
            }
            ("bytes", Some("decimal")) => {
                let (p, s) = decimal_params(o)?;
                node(Ty::DecBytes(p, s))
            }
            ("int", Some("date")) => node(Ty::Int(IntOut::Date)),
            ("int", Some("time-millis")) => node(Ty::Int(IntOut::TimeMillis)),
            ("long", Some("timestamp-micros")) => node(Ty::Long(LongOut::TsMicrosUtc)),
            ("long", Some("timestamp-millis")) => node(Ty::Long(LongOut::TsMillisUtc)),
            ("long", Some("local-timestamp-micros")) => node(Ty::Long(LongOut::TsMicrosLocal)),
            ("long", Some("time-micros")) => node(Ty::Long(LongOut::TimeMicros)),
            ("long", Some("timestamp-nanos")) => node(Ty::Long(LongOut::I64)),
            ("string", Some("uuid")) => node(Ty::Str),
            (prim, None) => match prim {
                "boolean" | "int" | "long" | "float" | "double" | "string" | "bytes" => {
                    self.named_or_primitive(prim, namespace)
                }
                _ => unsupported(format!("type {prim}")),
            },
            (prim, Some(l)) => unsupported(format!("logical type {l} on {prim}")),
        }
    }
}

fn decimal_params(o: &serde_json::Map<String, Value>) -> Result<(u32, u32), SchemaErr> {
    let p = o.get("precision").and_then(Value::as_u64).unwrap_or(0);
    let s = o.get("scale").and_then(Value::as_u64).unwrap_or(0);
    if p == 0 || p > 38 || s > p {
        return unsupported("a decimal outside precision 1-38");
    }
    Ok((p as u32, s as u32))
}

// ---------------------------------------------------------------------------------------------
// reading

struct Cur<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cur<'a> {
    #[inline]
    fn long(&mut self) -> Res<i64> {
        let mut result: u64 = 0;
        let mut shift = 0u32;
        loop {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err("truncated varint".into());
            };
            self.pos += 1;
            result |= ((b & 0x7F) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(((result >> 1) as i64) ^ -((result & 1) as i64));
            }
            shift += 7;
            if shift > 63 {
                return Err("varint too long".into());
            }
        }
    }

    /// Past one varint, its value unread (at most ten bytes, as `long` reads).
    #[inline]
    fn skip_varint(&mut self) -> Res<()> {
        let rest = self.buf.get(self.pos..).unwrap_or(&[]);
        match rest.iter().take(10).position(|&b| b & 0x80 == 0) {
            Some(i) => {
                self.pos += i + 1;
                Ok(())
            }
            None if rest.len() < 10 => Err("truncated varint".into()),
            None => Err("varint too long".into()),
        }
    }

    #[inline]
    fn take(&mut self, n: usize) -> Res<&'a [u8]> {
        let end = self.pos.checked_add(n).ok_or("length out of range")?;
        let Some(s) = self.buf.get(self.pos..end) else {
            return Err("truncated value".into());
        };
        self.pos = end;
        Ok(s)
    }

    #[inline]
    fn len_prefixed(&mut self) -> Res<&'a [u8]> {
        let n = self.long()?;
        if n < 0 {
            return Err("negative length".into());
        }
        self.take(n as usize)
    }

    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
}

#[derive(Default)]
struct Bits {
    bytes: Vec<u8>,
    len: usize,
}

impl Bits {
    #[inline]
    fn push(&mut self, on: bool) {
        if self.len % 8 == 0 {
            self.bytes.push(0);
        }
        if on {
            if let Some(b) = self.bytes.last_mut() {
                *b |= 1 << (self.len % 8);
            }
        }
        self.len += 1;
    }
}

/// A validity bitmap built only once a null occurs (most columns never hold one).
#[derive(Default)]
struct Validity {
    bits: Bits,
    len: usize,
    nulls: usize,
}

impl Validity {
    #[inline]
    fn push_valid(&mut self) {
        if self.nulls > 0 {
            self.bits.push(true);
        }
        self.len += 1;
    }

    fn push_null(&mut self) {
        if self.nulls == 0 {
            let mut bytes = vec![0xFFu8; self.len / 8];
            if self.len % 8 != 0 {
                bytes.push(((1u16 << (self.len % 8)) - 1) as u8);
            }
            self.bits = Bits {
                bytes,
                len: self.len,
            };
        }
        self.bits.push(false);
        self.nulls += 1;
        self.len += 1;
    }
}

enum Data {
    Bool(Bits),
    I32(Vec<i32>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    Bin { offsets: Vec<i64>, values: Vec<u8> },
    Dec(Vec<i128>),
    List { offsets: Vec<i64>, child: Box<Col> },
    Struct(Vec<Col>),
}

struct Col {
    validity: Validity,
    data: Data,
}

impl Col {
    fn new(node: &Node) -> Col {
        let data = match &node.ty {
            Ty::Bool => Data::Bool(Bits::default()),
            Ty::Int(IntOut::I32) | Ty::Int(IntOut::Date) => Data::I32(Vec::new()),
            Ty::Int(IntOut::TimeMillis) | Ty::Long(_) => Data::I64(Vec::new()),
            Ty::Float => Data::F32(Vec::new()),
            Ty::Double => Data::F64(Vec::new()),
            Ty::Str | Ty::Bytes | Ty::Fixed(_) => Data::Bin {
                offsets: vec![0],
                values: Vec::new(),
            },
            Ty::DecBytes(..) | Ty::DecFixed(..) => Data::Dec(Vec::new()),
            Ty::Array(item, _) => Data::List {
                offsets: vec![0],
                child: Box::new(Col::new(item)),
            },
            Ty::Record(fields) => Data::Struct(fields.iter().map(|(_, f)| Col::new(f)).collect()),
            Ty::Skip(inner) => return Col::new(inner),
        };
        Col {
            validity: Validity::default(),
            data,
        }
    }

    /// A null slot: invalid, with a placeholder value (children of a null struct are null too).
    fn push_null(&mut self) {
        self.validity.push_null();
        match &mut self.data {
            Data::Bool(b) => b.push(false),
            Data::I32(v) => v.push(0),
            Data::I64(v) => v.push(0),
            Data::F32(v) => v.push(0.0),
            Data::F64(v) => v.push(0.0),
            Data::Bin { offsets, .. } | Data::List { offsets, .. } => {
                let last = *offsets.last().unwrap_or(&0);
                offsets.push(last);
            }
            Data::Dec(v) => v.push(0),
            Data::Struct(children) => children.iter_mut().for_each(Col::push_null),
        }
    }

    fn len(&self) -> usize {
        self.validity.len
    }

    /// Room for `n` more values (an array block announces its count).
    fn reserve(&mut self, n: usize) {
        match &mut self.data {
            Data::Bool(_) | Data::Bin { .. } | Data::List { .. } => {}
            Data::I32(v) => v.reserve(n),
            Data::I64(v) => v.reserve(n),
            Data::F32(v) => v.reserve(n),
            Data::F64(v) => v.reserve(n),
            Data::Dec(v) => v.reserve(n),
            Data::Struct(children) => children.iter_mut().for_each(|c| c.reserve(n)),
        }
    }

    fn nulls(&self) -> usize {
        self.validity.nulls
    }

    /// Room for the rest of a decode of `total` records, `done` of them read: every buffer
    /// of the tree grows in proportion (a list's items and a string's bytes as estimated from
    /// those so far, with an eighth more), so it is allocated about once, not doubled from
    /// small. Grown by doubling, each step copied the buffer into fresh memory whose pages
    /// were faulted in: half the page faults of a plan, ~15% of its CPU in the kernel.
    fn grow_to(&mut self, done: usize, total: usize) {
        fn room<T>(v: &mut Vec<T>, done: usize, total: usize) {
            let len = v.len();
            let want = len as u128 * total as u128 / done.max(1) as u128;
            let want = usize::try_from(want.saturating_add(want / 8)).unwrap_or(usize::MAX);
            if want > v.capacity() {
                // an estimate only: memory refused leaves the buffer to grow as it fills
                let _ = v.try_reserve_exact(want - len);
            }
        }
        match &mut self.data {
            Data::Bool(_) => {}
            Data::I32(v) => room(v, done, total),
            Data::I64(v) => room(v, done, total),
            Data::F32(v) => room(v, done, total),
            Data::F64(v) => room(v, done, total),
            Data::Dec(v) => room(v, done, total),
            Data::Bin { offsets, values } => {
                room(offsets, done, total);
                room(values, done, total);
            }
            Data::List { offsets, child } => {
                room(offsets, done, total);
                child.grow_to(done, total);
            }
            Data::Struct(children) => children.iter_mut().for_each(|c| c.grow_to(done, total)),
        }
    }
}

fn be_i128(b: &[u8]) -> Res<i128> {
    if b.len() > 16 {
        return Err("decimal wider than 16 bytes".into());
    }
    if b.is_empty() {
        return Ok(0);
    }
    let mut buf = if b[0] & 0x80 != 0 {
        [0xFFu8; 16]
    } else {
        [0u8; 16]
    };
    buf[16 - b.len()..].copy_from_slice(b);
    Ok(i128::from_be_bytes(buf))
}

/// Reads a nullable value's union branch: whether it is the null one (false for a value
/// that is not nullable, which has no branch).
#[inline]
fn is_null(node: &Node, cur: &mut Cur) -> Res<bool> {
    let Some(null_at) = node.null_branch else {
        return Ok(false);
    };
    let branch = cur.long()?;
    if branch != null_at && branch != 1 - null_at {
        return Err(format!("union branch {branch} out of range"));
    }
    Ok(branch == null_at)
}

fn read_value(node: &Node, col: &mut Col, cur: &mut Cur) -> Res<()> {
    if let Ty::Skip(inner) = &node.ty {
        return read_past(inner, col, cur);
    }
    if is_null(node, cur)? {
        col.push_null();
        return Ok(());
    }
    col.validity.push_valid();
    match (&node.ty, &mut col.data) {
        (Ty::Bool, Data::Bool(b)) => {
            let v = cur.take(1)?[0];
            if v > 1 {
                return Err(format!("boolean byte {v}"));
            }
            b.push(v == 1);
        }
        (Ty::Int(out), data) => {
            let v = cur.long()?;
            let v = i32::try_from(v).map_err(|_| "int out of range".to_string())?;
            match (out, data) {
                (IntOut::TimeMillis, Data::I64(d)) => d.push((v as i64) * 1_000_000),
                (_, Data::I32(d)) => d.push(v),
                _ => return Err("internal: column of another type".into()),
            }
        }
        (Ty::Long(out), Data::I64(d)) => {
            let v = cur.long()?;
            d.push(if *out == LongOut::TimeMicros {
                v.wrapping_mul(1000)
            } else {
                v
            });
        }
        (Ty::Float, Data::F32(d)) => {
            let b = cur.take(4)?;
            d.push(f32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        }
        (Ty::Double, Data::F64(d)) => {
            let b = cur.take(8)?;
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            d.push(f64::from_le_bytes(a));
        }
        (Ty::Str, Data::Bin { offsets, values }) => {
            let b = cur.len_prefixed()?;
            if std::str::from_utf8(b).is_err() {
                return Err("string is not UTF-8".into());
            }
            values.extend_from_slice(b);
            offsets.push(values.len() as i64);
        }
        (Ty::Bytes, Data::Bin { offsets, values }) => {
            values.extend_from_slice(cur.len_prefixed()?);
            offsets.push(values.len() as i64);
        }
        (Ty::Fixed(n), Data::Bin { offsets, values }) => {
            values.extend_from_slice(cur.take(*n)?);
            offsets.push(values.len() as i64);
        }
        (Ty::DecBytes(..), Data::Dec(d)) => d.push(be_i128(cur.len_prefixed()?)?),
        (Ty::DecFixed(n, ..), Data::Dec(d)) => d.push(be_i128(cur.take(*n)?)?),
        (Ty::Array(item, min), Data::List { offsets, child }) => {
            let min = *min;
            loop {
                let mut count = cur.long()?;
                if count == 0 {
                    break;
                }
                if count < 0 {
                    count = count.checked_neg().ok_or("array count out of range")?;
                    let size = cur.long()?;
                    if size < 0 {
                        return Err("negative array block size".into());
                    }
                }
                let count = count as u64;
                if count > cur.remaining() as u64 / min {
                    return Err("array count beyond the block".into());
                }
                child.reserve(count as usize);
                for _ in 0..count {
                    read_value(item, child, cur)?;
                }
            }
            offsets.push(child.len() as i64);
        }
        (Ty::Record(fields), Data::Struct(children)) => {
            for ((_, f), c) in fields.iter().zip(children.iter_mut()) {
                read_value(f, c, cur)?;
            }
        }
        _ => return Err("internal: column of another type".into()),
    }
    Ok(())
}

/// Reads past one value of `node`, keeping nothing, with the checks `read_value` makes of
/// the encoding (union branches, varints, lengths, counts, booleans); what it makes of the
/// values themselves (int ranges, UTF-8, decimal widths) is left to a decode that keeps them.
fn skip_value(node: &Node, cur: &mut Cur) -> Res<()> {
    if is_null(node, cur)? {
        return Ok(());
    }
    match &node.ty {
        Ty::Bool => {
            let v = cur.take(1)?[0];
            if v > 1 {
                return Err(format!("boolean byte {v}"));
            }
        }
        Ty::Int(_) | Ty::Long(_) => cur.skip_varint()?,
        Ty::Float => {
            cur.take(4)?;
        }
        Ty::Double => {
            cur.take(8)?;
        }
        Ty::Str | Ty::Bytes | Ty::DecBytes(..) => {
            cur.len_prefixed()?;
        }
        Ty::Fixed(n) | Ty::DecFixed(n, ..) => {
            cur.take(*n)?;
        }
        Ty::Array(item, min) => skip_items(item, *min, cur)?,
        Ty::Record(fields) => {
            for (_, f) in fields {
                skip_value(f, cur)?;
            }
        }
        Ty::Skip(inner) => skip_value(inner, cur)?,
    }
    Ok(())
}

/// Reads past an array's blocks of items (see `skip_value`).
fn skip_items(item: &Node, min: u64, cur: &mut Cur) -> Res<()> {
    loop {
        let mut count = cur.long()?;
        if count == 0 {
            return Ok(());
        }
        if count < 0 {
            count = count.checked_neg().ok_or("array count out of range")?;
            if cur.long()? < 0 {
                return Err("negative array block size".into());
            }
        }
        if count as u64 > cur.remaining() as u64 / min {
            return Err("array count beyond the block".into());
        }
        match (&item.ty, item.null_branch) {
            // a map's items (key and value, neither nullable): no call per value
            (Ty::Record(fields), None) if fields.iter().all(|(_, f)| plain(f)) => {
                for _ in 0..count {
                    for (_, f) in fields {
                        match f.ty {
                            Ty::Int(_) | Ty::Long(_) => cur.skip_varint()?,
                            _ => {
                                cur.len_prefixed()?;
                            }
                        }
                    }
                }
            }
            _ => {
                for _ in 0..count {
                    skip_value(item, cur)?;
                }
            }
        }
    }
}

/// An array value of `node` read past: null stays null, any other is kept as an empty array.
fn read_past(node: &Node, col: &mut Col, cur: &mut Cur) -> Res<()> {
    if is_null(node, cur)? {
        col.push_null();
        return Ok(());
    }
    let (Ty::Array(item, min), Data::List { offsets, child }) = (&node.ty, &mut col.data) else {
        return Err("internal: a field read past that is not an array".into());
    };
    skip_items(item, *min, cur)?;
    offsets.push(child.len() as i64);
    col.validity.push_valid();
    Ok(())
}

/// A value `skip_value` reads past in a tight loop: a varint or a length and its bytes.
fn plain(node: &Node) -> bool {
    node.null_branch.is_none() && matches!(node.ty, Ty::Int(_) | Ty::Long(_) | Ty::Bytes | Ty::Str)
}

/// `fields` with the named array fields of the top-level `record` field read past (see
/// `read_past`); a field of another type is decoded as usual.
fn with_skipped(fields: &[(String, Node)], record: &str, skip: &[String]) -> Vec<(String, Node)> {
    fields
        .iter()
        .map(|(name, node)| match (&node.ty, name == record) {
            (Ty::Record(inner), true) => {
                let inner = inner
                    .iter()
                    .map(|(n, f)| {
                        let f = if skip.contains(n) && matches!(f.ty, Ty::Array(..)) {
                            Node {
                                ty: Ty::Skip(Box::new(f.clone())),
                                null_branch: None,
                            }
                        } else {
                            f.clone()
                        };
                        (n.clone(), f)
                    })
                    .collect();
                let ty = Ty::Record(inner);
                (
                    name.clone(),
                    Node {
                        ty,
                        null_branch: node.null_branch,
                    },
                )
            }
            _ => (name.clone(), node.clone()),
        })
        .collect()
}

/// The fields as decoded: each array read past is of its own type again (its values are
/// null or empty), at any depth.
fn unskipped(fields: Vec<(String, Node)>) -> Vec<(String, Node)> {
    fields
        .into_iter()
        .map(|(name, node)| {
            let node = match node.ty {
                Ty::Skip(inner) => *inner,
                Ty::Record(inner) => Node {
                    ty: Ty::Record(unskipped(inner)),
                    null_branch: node.null_branch,
                },
                ty => Node {
                    ty,
                    null_branch: node.null_branch,
                },
            };
            (name, node)
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// container

/// Avro's `deflate`: one raw DEFLATE stream (RFC 1951), which must be complete; bytes after
/// its end are ignored (PyIceberg leaves zlib's checksum there). The inflated bytes are the
/// first `n` of `out` (`n` returned). libdeflate inflates into a buffer of a known size, ~1.7x
/// the speed of zlib-rs on Java's manifests: `out` keeps the largest size a block needed
/// (zeroed once, when it grows) and doubles when a block needs more, up to `MAX_INFLATED`.
fn inflate(block: &[u8], state: &mut Decompressor, out: &mut Vec<u8>) -> Res<usize> {
    if out.is_empty() {
        let want = block.len().saturating_mul(8).clamp(1024, MAX_INFLATED);
        grow(out, want)?;
    }
    loop {
        match state.deflate_decompress(block, out) {
            Ok(n) => return Ok(n),
            Err(DecompressionError::InsufficientSpace) if out.len() < MAX_INFLATED => {
                grow(out, out.len().saturating_mul(2).min(MAX_INFLATED))?;
            }
            Err(DecompressionError::InsufficientSpace) => {
                return Err("block inflates beyond 1 GiB".into());
            }
            Err(DecompressionError::BadData) => {
                return Err("deflate stream damaged or cut short".into());
            }
        }
    }
}

/// `out` made `len` bytes long (zeros), or an error where memory is refused.
fn grow(out: &mut Vec<u8>, len: usize) -> Res<()> {
    out.try_reserve_exact(len.saturating_sub(out.len()))
        .map_err(|_| format!("no memory for a block of {len} bytes"))?;
    out.resize(len, 0);
    Ok(())
}

struct Header<'a> {
    schema: &'a [u8],
    codec: Codec,
    sync: [u8; 16],
    body: usize,
    /// every metadata pair, in file order (a key given twice: the last wins, as in fastavro)
    meta: Vec<(&'a str, &'a [u8])>,
}

enum Codec {
    Null,
    Deflate,
    /// a codec the Avro specification names that is not decoded here (the caller decodes
    /// such a file another way)
    Other(String),
}

/// The codecs the Avro specification defines; any other name is a damaged or foreign file.
const KNOWN_CODECS: [&str; 6] = ["null", "deflate", "snappy", "bzip2", "xz", "zstandard"];

fn header(data: &[u8]) -> Res<Header<'_>> {
    if data.len() < 4 || &data[..4] != MAGIC {
        return Err("not an Avro container (bad magic)".into());
    }
    let mut cur = Cur { buf: data, pos: 4 };
    let mut schema = None;
    let mut codec: Option<&[u8]> = None;
    let mut meta = Vec::new();
    loop {
        let mut count = cur
            .long()
            .map_err(|e| format!("header metadata cut short or malformed: {e}"))?;
        if count == 0 {
            break;
        }
        if count < 0 {
            count = count.checked_neg().ok_or("header count out of range")?;
            cur.long()?;
        }
        if count as u64 > cur.remaining() as u64 {
            return Err("header count beyond the file".into());
        }
        for _ in 0..count {
            let key = cur
                .len_prefixed()
                .map_err(|e| format!("header metadata cut short or malformed: {e}"))?;
            let value = cur
                .len_prefixed()
                .map_err(|e| format!("header metadata cut short or malformed: {e}"))?;
            let Ok(name) = std::str::from_utf8(key) else {
                return Err("header metadata key is not UTF-8".into());
            };
            meta.push((name, value));
            match key {
                b"avro.schema" => schema = Some(value),
                b"avro.codec" => codec = Some(value), // given twice: the last, as fastavro
                _ => {}
            }
        }
    }
    let sync_bytes = cur
        .take(16)
        .map_err(|_| "header cut short before the sync marker".to_string())?;
    let mut sync = [0u8; 16];
    sync.copy_from_slice(sync_bytes);
    let codec = match codec.unwrap_or(b"null") {
        b"null" => Codec::Null,
        b"deflate" => Codec::Deflate,
        other => {
            let name = String::from_utf8_lossy(other).into_owned();
            if !KNOWN_CODECS.contains(&name.as_str()) {
                return Err(format!("unknown codec {name:?}"));
            }
            Codec::Other(name)
        }
    };
    let schema = schema.ok_or("no avro.schema in the header")?;
    Ok(Header {
        schema,
        codec,
        sync,
        body: cur.pos,
        meta,
    })
}

enum Outcome {
    Columns(Vec<(String, Node)>, Vec<Col>, usize),
    Unsupported(String),
}

/// What a writer schema and codec decode to: shared by every container decoded into one set
/// of columns.
struct Plan {
    fields: Vec<(String, Node)>,
    /// the fewest bytes one record takes: bounds the count a block may announce
    min: u64,
    deflate: bool,
}

/// The header's plan, or (`Err` inside) what is not handled here; `skip` names fields of the
/// `data_file` record that are read past, not kept.
fn plan(h: &Header, skip: &[String]) -> Res<Result<Plan, String>> {
    let deflate = match &h.codec {
        Codec::Null => false,
        Codec::Deflate => true,
        Codec::Other(name) => return Ok(Err(format!("the {name} codec"))),
    };
    let json: Value =
        serde_json::from_slice(h.schema).map_err(|e| format!("schema is not JSON: {e}"))?;
    let mut parser = SchemaParser {
        named: HashMap::new(),
    };
    let root = match parser.parse(&json, "") {
        Ok(n) => n,
        Err(SchemaErr::Unsupported(what)) => return Ok(Err(what)),
        Err(SchemaErr::Invalid(what)) => return Err(format!("invalid schema: {what}")),
    };
    let (Ty::Record(fields), None) = (&root.ty, root.null_branch) else {
        return Ok(Err("a top-level schema that is not a record".into()));
    };
    let min = root.min_size();
    if min == 0 {
        return Ok(Err("records that take no bytes".into()));
    }
    Ok(Ok(Plan {
        fields: if skip.is_empty() {
            fields.clone()
        } else {
            with_skipped(fields, "data_file", skip)
        },
        min,
        deflate,
    }))
}

/// The columns being filled, and the inflate state and buffer every block reuses.
struct Sink {
    cols: Vec<Col>,
    rows: usize,
    inflated: Vec<u8>,
    state: Decompressor,
    /// the records the blocks' headers announce, if they could be read ahead (see `grow_to`)
    expected: Option<usize>,
}

/// Records read before the columns are sized for the rest (see `Col::grow_to`): enough to
/// estimate the lists' and strings' sizes from, on a layout of one record per block too.
const SIZE_AFTER_ROWS: usize = 64;

impl Sink {
    fn new(plan: &Plan, expected: Option<usize>) -> Sink {
        Sink {
            cols: plan.fields.iter().map(|(_, f)| Col::new(f)).collect(),
            rows: 0,
            inflated: Vec::new(),
            state: Decompressor::new(),
            expected,
        }
    }

    /// Once `SIZE_AFTER_ROWS` records are in (or all of them), the columns get room for the
    /// records still expected.
    fn size_for_rest(&mut self, read: usize) {
        let Some(total) = self.expected else {
            return;
        };
        if read >= SIZE_AFTER_ROWS.min(total) && total > read {
            self.expected = None; // once
            self.cols.iter_mut().for_each(|c| c.grow_to(read, total));
        }
    }

    /// Appends the records of every data block of `data` (whose header is `h`) to the
    /// columns; the number of records read.
    fn read_blocks(&mut self, plan: &Plan, data: &[u8], h: &Header) -> Res<usize> {
        let mut rows = 0usize;
        let mut blocks = Blocks::new(data, h);
        while let Some(block) = blocks.next_block() {
            let Block {
                no: block_no,
                count,
                stored,
                marker,
            } = block?;
            if marker != h.sync {
                return Err(format!("block {block_no}: sync marker differs"));
            }
            let bytes: &[u8] = if plan.deflate {
                let n = inflate(stored, &mut self.state, &mut self.inflated)
                    .map_err(|e| format!("block {block_no}: {e}"))?;
                &self.inflated[..n]
            } else {
                stored
            };
            if count > bytes.len() as u64 / plan.min {
                return Err(format!(
                    "block {block_no}: {count} records cannot fit in {} bytes",
                    bytes.len()
                ));
            }
            let mut rc = Cur { buf: bytes, pos: 0 };
            self.cols.iter_mut().for_each(|c| c.reserve(count as usize));
            for _ in 0..count {
                for ((_, f), c) in plan.fields.iter().zip(self.cols.iter_mut()) {
                    read_value(f, c, &mut rc)
                        .map_err(|e| format!("block {block_no}, record {rows}: {e}"))?;
                }
                rows += 1;
            }
            if rc.pos != bytes.len() {
                return Err(format!(
                    "block {block_no}: {} bytes after its {count} records",
                    bytes.len() - rc.pos
                ));
            }
            self.size_for_rest(self.rows + rows);
        }
        self.rows += rows;
        Ok(rows)
    }
}

/// One data block of a container: its number, record count, stored bytes and sync marker.
struct Block<'a> {
    no: usize,
    count: u64,
    stored: &'a [u8],
    marker: &'a [u8],
}

/// The data blocks of a container, in order: each block's count and size read, its bytes and
/// marker taken. What is cut short or negative is an error naming the block; the marker is
/// the caller's to check.
struct Blocks<'a> {
    cur: Cur<'a>,
    no: usize,
}

impl<'a> Blocks<'a> {
    fn new(data: &'a [u8], h: &Header) -> Blocks<'a> {
        Blocks {
            cur: Cur {
                buf: data,
                pos: h.body,
            },
            no: 0,
        }
    }

    fn next_block(&mut self) -> Option<Res<Block<'a>>> {
        if self.cur.remaining() == 0 {
            return None;
        }
        let no = self.no;
        self.no += 1;
        Some(self.read(no))
    }

    fn read(&mut self, no: usize) -> Res<Block<'a>> {
        let cur = &mut self.cur;
        let count = cur.long().map_err(|e| format!("block {no}: {e}"))?;
        let size = cur.long().map_err(|e| format!("block {no}: {e}"))?;
        if count < 0 || size < 0 {
            return Err(format!("block {no}: negative count or size"));
        }
        let stored = cur
            .take(size as usize)
            .map_err(|_| format!("block {no}: cut short"))?;
        let marker = cur
            .take(16)
            .map_err(|_| format!("block {no}: cut short before its sync marker"))?;
        Ok(Block {
            no,
            count: count as u64,
            stored,
            marker,
        })
    }
}

/// The records `data`'s blocks announce, read from their headers alone (the blocks' bytes
/// skipped); None when a block cannot be read or its count cannot fit it (`min` bytes a
/// record; deflate inflates at most 1032:1): the decode then reports what is wrong, and the
/// columns grow as they fill. A damaged count never sizes a column.
fn announced_records(data: &[u8], h: &Header, plan: &Plan) -> Option<usize> {
    let inflates = if plan.deflate { 1032 } else { 1 };
    let mut total = 0usize;
    let mut blocks = Blocks::new(data, h);
    while let Some(block) = blocks.next_block() {
        let block = block.ok()?;
        if block.count > (block.stored.len() as u64).saturating_mul(inflates) / plan.min {
            return None;
        }
        total = total.checked_add(usize::try_from(block.count).ok()?)?;
    }
    Some(total)
}

fn decode(data: &[u8], skip: &[String]) -> Res<Outcome> {
    let h = header(data)?;
    let plan = match plan(&h, skip)? {
        Ok(plan) => plan,
        Err(what) => return Ok(Outcome::Unsupported(what)),
    };
    let mut sink = Sink::new(&plan, announced_records(data, &h, &plan));
    sink.read_blocks(&plan, data, &h)?;
    Ok(Outcome::Columns(
        unskipped(plan.fields),
        sink.cols,
        sink.rows,
    ))
}

/// Several containers' records decoded into one set of columns, and how many each held.
enum Joined {
    Columns(Vec<(String, Node)>, Vec<Col>, Vec<usize>),
    /// a type or codec not handled here, or headers whose metadata differ
    Declined(String),
}

/// The records of every container in `datas`, in order, as one set of columns: their headers
/// must hold the same metadata (schema, codec, and every other key and value, in the same
/// order), each block ends with its own container's sync marker. An error names the index of
/// the container that is damaged.
fn decode_joined(datas: &[&[u8]], skip: &[String]) -> Result<Joined, (usize, String)> {
    let Some(first) = datas.first() else {
        return Ok(Joined::Declined("no containers".into()));
    };
    let h0 = header(first).map_err(|e| (0, e))?;
    let plan = match plan(&h0, skip).map_err(|e| (0, e))? {
        Ok(plan) => plan,
        Err(what) => return Ok(Joined::Declined(what)),
    };
    // every header first: a batch another header declines is left whole to the caller
    let mut headers = Vec::with_capacity(datas.len());
    for (i, data) in datas.iter().enumerate().skip(1) {
        let h = header(data).map_err(|e| (i, e))?;
        if h.meta != h0.meta {
            return Ok(Joined::Declined(format!(
                "container {i}: header metadata differ from the first's"
            )));
        }
        headers.push(h);
    }
    let expected = datas
        .iter()
        .zip(std::iter::once(&h0).chain(headers.iter()))
        .try_fold(0usize, |sum, (data, h)| {
            sum.checked_add(announced_records(data, h, &plan)?)
        });
    let mut sink = Sink::new(&plan, expected);
    let mut counts = Vec::with_capacity(datas.len());
    for (i, (data, h)) in datas
        .iter()
        .zip(std::iter::once(&h0).chain(headers.iter()))
        .enumerate()
    {
        counts.push(sink.read_blocks(&plan, data, h).map_err(|e| (i, e))?);
    }
    Ok(Joined::Columns(unskipped(plan.fields), sink.cols, counts))
}

// ---------------------------------------------------------------------------------------------
// to Python

/// Decode an Avro container of manifest entries into one Arrow record batch.
///
/// Returns the (schema, array) PyCapsules of the Arrow C Data Interface (the Arrow PyCapsule
/// protocol's "arrow_schema" and "arrow_array"), or a str naming the type that is not
/// handled here; raises ValueError naming what is wrong with damaged bytes. The GIL is
/// released while the bytes are parsed and the batch is laid out. `skip` names array fields
/// of the `data_file` record read past: each value null or empty in the batch (a plan that
/// reads no metrics skips their maps' items: most of a manifest's bytes).
#[pyfunction]
#[pyo3(signature = (data, skip = Vec::new()))]
fn decode_arrow(py: Python<'_>, data: &[u8], skip: Vec<String>) -> PyResult<PyObject> {
    let outcome = py
        .allow_threads(|| -> Res<Result<arrow_c::Exported, String>> {
            Ok(match decode(data, &skip)? {
                Outcome::Unsupported(what) => Err(what),
                Outcome::Columns(fields, cols, rows) => arrow_c::export_batch(&fields, cols, rows)?
                    .ok_or_else(|| "a field name holding a NUL character".to_string()),
            })
        })
        .map_err(PyValueError::new_err)?;
    match outcome {
        Err(what) => Ok(what.into_pyobject(py)?.into_any().unbind()),
        Ok(exported) => Ok(arrow_c::capsules(py, exported)?
            .into_pyobject(py)?
            .into_any()
            .unbind()),
    }
}

/// The exported batch and the records per container, or why the containers were declined.
type JoinedBatch = Result<(arrow_c::Exported, Vec<usize>), String>;

/// Decode several Avro containers of manifest entries into one Arrow record batch, their
/// records in the order given.
///
/// Returns (schema capsule, array capsule, records per container), or a str when the writer
/// schema holds a type not handled here or the containers' header metadata differ (one
/// writer schema, codec and metadata for all; each container keeps its own sync marker).
/// Damaged bytes raise ValueError whose message starts with "container <index>: " and whose
/// `container` attribute is that index. The GIL is released while the bytes are parsed.
/// `skip`: as for `decode_arrow`.
#[pyfunction]
#[pyo3(signature = (datas, skip = Vec::new()))]
fn decode_arrow_joined<'py>(
    py: Python<'py>,
    datas: Vec<Bound<'py, PyBytes>>,
    skip: Vec<String>,
) -> PyResult<PyObject> {
    let slices: Vec<&[u8]> = datas.iter().map(|d| d.as_bytes()).collect();
    let outcome = py.allow_threads(|| -> Result<JoinedBatch, (usize, String)> {
        Ok(match decode_joined(&slices, &skip)? {
            Joined::Declined(what) => Err(what),
            Joined::Columns(fields, cols, counts) => {
                let rows = counts.iter().sum();
                match arrow_c::export_batch(&fields, cols, rows).map_err(|e| (0, e))? {
                    Some(exported) => Ok((exported, counts)),
                    None => Err("a field name holding a NUL character".to_string()),
                }
            }
        })
    });
    match outcome {
        Err((index, what)) => {
            let err = PyValueError::new_err(format!("container {index}: {what}"));
            err.value(py).setattr("container", index)?;
            Err(err)
        }
        Ok(Err(what)) => Ok(what.into_pyobject(py)?.into_any().unbind()),
        Ok(Ok((exported, counts))) => {
            let (schema, array) = arrow_c::capsules(py, exported)?;
            Ok((schema, array, counts)
                .into_pyobject(py)?
                .into_any()
                .unbind())
        }
    }
}

/// The container's header: its metadata (every value as text, as fastavro gives it) and where
/// the first data block starts. Raises ValueError naming what is wrong with a damaged header
/// (bad magic, cut short, a malformed metadata map, a value that is not UTF-8, a codec the
/// Avro specification does not name).
#[pyfunction]
fn read_header(py: Python<'_>, data: &[u8]) -> PyResult<PyObject> {
    let h = header(data).map_err(PyValueError::new_err)?;
    let meta = PyDict::new(py);
    for (key, value) in h.meta {
        let Ok(text) = std::str::from_utf8(value) else {
            return Err(PyValueError::new_err(format!(
                "header metadata {key:?} is not UTF-8"
            )));
        };
        meta.set_item(key, text)?;
    }
    Ok((meta, h.body).into_pyobject(py)?.into_any().unbind())
}

#[pymodule]
fn _manifest_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(decode_arrow, m)?)?;
    m.add_function(wrap_pyfunction!(decode_arrow_joined, m)?)?;
    m.add_function(wrap_pyfunction!(read_header, m)?)?;
    Ok(())
}
