//! Decoded columns handed to Python through the Arrow C Data Interface
//! (<https://arrow.apache.org/docs/format/CDataInterface.html>).
//!
//! One struct array (a record batch) of every column, described by an `ArrowSchema` and
//! carried by an `ArrowArray`, each in a PyCapsule ("arrow_schema", "arrow_array") that
//! pyarrow imports in one call. The buffers are the decoded vectors themselves (no copy);
//! the release callbacks free them. Building an array per buffer on the Python side held
//! the GIL for ~100 objects a manifest (~2.5x the import's time), and freeing those objects
//! held it again: an imported array owns no Python object, so freeing it is the release
//! callbacks' `free`s alone, which need no GIL, on whichever thread drops the last reference.

use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr;

use pyo3::ffi;
use pyo3::prelude::*;

use crate::{Col, Data, IntOut, LongOut, Node, Ty};

/// `ARROW_FLAG_NULLABLE`: every field is nullable, as in the tables polars gives.
const NULLABLE: i64 = 2;
const SCHEMA_CAPSULE: &CStr = c"arrow_schema";
const ARRAY_CAPSULE: &CStr = c"arrow_array";

#[repr(C)]
struct ArrowSchema {
    format: *const c_char,
    name: *const c_char,
    metadata: *const c_char,
    flags: i64,
    n_children: i64,
    children: *mut *mut ArrowSchema,
    dictionary: *mut ArrowSchema,
    release: Option<unsafe extern "C" fn(*mut ArrowSchema)>,
    private_data: *mut c_void,
}

#[repr(C)]
struct ArrowArray {
    length: i64,
    null_count: i64,
    offset: i64,
    n_buffers: i64,
    n_children: i64,
    buffers: *mut *const c_void,
    children: *mut *mut ArrowArray,
    dictionary: *mut ArrowArray,
    release: Option<unsafe extern "C" fn(*mut ArrowArray)>,
    private_data: *mut c_void,
}

/// What a schema node owns: its strings and its children's structs.
struct SchemaPrivate {
    _format: CString,
    _name: CString,
    children: Vec<*mut ArrowSchema>,
}

/// The struct can be moved to a consumer (spec: "moving an array"); the release callback
/// frees what `private_data` owns and the children's structs, whichever thread calls it.
unsafe extern "C" fn release_schema(schema: *mut ArrowSchema) {
    // SAFETY: the consumer calls this once on a struct made by `schema` (release not null);
    // a second call sees release null and does nothing
    unsafe {
        if schema.is_null() || (*schema).release.is_none() {
            return;
        }
        let private = Box::from_raw((*schema).private_data as *mut SchemaPrivate);
        for &child in &private.children {
            // a child moved out by the consumer is already marked released
            if let Some(release) = (*child).release {
                release(child);
            }
            drop(Box::from_raw(child));
        }
        drop(private);
        (*schema).private_data = ptr::null_mut();
        (*schema).release = None;
    }
}

/// A schema node; `None` when a name holds a NUL byte (a C string cannot carry it).
fn schema(
    name: &str,
    format: String,
    flags: i64,
    children: Vec<ArrowSchema>,
) -> Option<ArrowSchema> {
    let name = CString::new(name);
    let format = CString::new(format);
    let children: Vec<*mut ArrowSchema> = children
        .into_iter()
        .map(|c| Box::into_raw(Box::new(c)))
        .collect();
    let (Ok(name), Ok(format)) = (name, format) else {
        for child in children {
            // SAFETY: made just above, released and freed once here
            unsafe {
                release_schema(child);
                drop(Box::from_raw(child));
            }
        }
        return None;
    };
    let mut private = Box::new(SchemaPrivate {
        _format: format,
        _name: name,
        children,
    });
    Some(ArrowSchema {
        format: private._format.as_ptr(),
        name: private._name.as_ptr(),
        metadata: ptr::null(),
        flags,
        n_children: private.children.len() as i64,
        children: private.children.as_mut_ptr(),
        dictionary: ptr::null_mut(),
        release: Some(release_schema),
        private_data: Box::into_raw(private) as *mut c_void,
    })
}

/// The Arrow format string of the type `polars.read_avro(...).to_arrow()` gives.
fn format(node: &Node) -> String {
    match &node.ty {
        Ty::Bool => "b".into(),
        Ty::Int(IntOut::I32) => "i".into(),
        Ty::Int(IntOut::Date) => "tdD".into(),
        Ty::Int(IntOut::TimeMillis) | Ty::Long(LongOut::TimeMicros) => "ttn".into(),
        Ty::Long(LongOut::I64) => "l".into(),
        Ty::Long(LongOut::TsMicrosUtc) => "tsu:UTC".into(),
        Ty::Long(LongOut::TsMillisUtc) => "tsm:UTC".into(),
        Ty::Long(LongOut::TsMicrosLocal) => "tsu:".into(),
        Ty::Float => "f".into(),
        Ty::Double => "g".into(),
        Ty::Str => "U".into(),
        Ty::Bytes | Ty::Fixed(_) => "Z".into(),
        Ty::DecBytes(p, s) | Ty::DecFixed(_, p, s) => format!("d:{p},{s}"),
        Ty::Array(..) => "+L".into(),
        Ty::Record(_) => "+s".into(),
        Ty::Skip(inner) => format(inner), // (made the field it reads past before export)
    }
}

fn field(name: &str, node: &Node) -> Option<ArrowSchema> {
    let children = match &node.ty {
        Ty::Array(item, _) => vec![field("item", item)?],
        Ty::Record(fields) => fields
            .iter()
            .map(|(n, f)| field(n, f))
            .collect::<Option<Vec<_>>>()?,
        _ => vec![],
    };
    schema(name, format(node), NULLABLE, children)
}

/// The record batch's schema: a struct of the columns; `None` when a name holds a NUL byte.
fn batch_schema(fields: &[(String, Node)]) -> Option<ArrowSchema> {
    let children = fields
        .iter()
        .map(|(n, f)| field(n, f))
        .collect::<Option<Vec<_>>>()?;
    schema("", "+s".into(), 0, children)
}

/// A decoded vector, kept alive (and unchanged) for as long as the array that reads it.
enum Owned {
    U8(Vec<u8>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    I128(Vec<i128>),
}

impl Owned {
    /// Its first byte, or null when empty (the interface allows null for a buffer of no
    /// bytes); spare capacity given back first (a shrinking realloc), as it would otherwise
    /// live as long as the arrays (a cached manifest's).
    fn pointer(&mut self) -> *const c_void {
        fn at<T>(v: &mut Vec<T>) -> *const c_void {
            v.shrink_to_fit();
            if v.is_empty() {
                ptr::null()
            } else {
                v.as_ptr() as *const c_void
            }
        }
        match self {
            Owned::U8(v) => at(v),
            Owned::I32(v) => at(v),
            Owned::I64(v) => at(v),
            Owned::F32(v) => at(v),
            Owned::F64(v) => at(v),
            Owned::I128(v) => at(v),
        }
    }
}

/// What an array node owns: the vectors its buffers point into, the buffer pointer list and
/// its children's structs.
struct ArrayPrivate {
    _vectors: Vec<Owned>,
    buffers: Vec<*const c_void>,
    children: Vec<*mut ArrowArray>,
}

unsafe extern "C" fn release_array(array: *mut ArrowArray) {
    // SAFETY: as `release_schema`; the vectors are plain Rust memory, freed on any thread
    unsafe {
        if array.is_null() || (*array).release.is_none() {
            return;
        }
        let private = Box::from_raw((*array).private_data as *mut ArrayPrivate);
        for &child in &private.children {
            if let Some(release) = (*child).release {
                release(child);
            }
            drop(Box::from_raw(child));
        }
        drop(private);
        (*array).private_data = ptr::null_mut();
        (*array).release = None;
    }
}

/// An array node over `buffers` (None: an absent validity bitmap).
fn array(
    length: usize,
    null_count: usize,
    buffers: Vec<Option<Owned>>,
    children: Vec<ArrowArray>,
) -> ArrowArray {
    let mut vectors = Vec::with_capacity(buffers.len());
    let mut pointers = Vec::with_capacity(buffers.len());
    for buffer in buffers {
        match buffer {
            Some(mut v) => {
                // the vector's heap block does not move when the vector itself is moved
                pointers.push(v.pointer());
                vectors.push(v);
            }
            None => pointers.push(ptr::null()),
        }
    }
    let children: Vec<*mut ArrowArray> = children
        .into_iter()
        .map(|c| Box::into_raw(Box::new(c)))
        .collect();
    let mut private = Box::new(ArrayPrivate {
        _vectors: vectors,
        buffers: pointers,
        children,
    });
    ArrowArray {
        length: length as i64,
        null_count: null_count as i64,
        offset: 0,
        n_buffers: private.buffers.len() as i64,
        n_children: private.children.len() as i64,
        buffers: private.buffers.as_mut_ptr(),
        children: private.children.as_mut_ptr(),
        dictionary: ptr::null_mut(),
        release: Some(release_array),
        private_data: Box::into_raw(private) as *mut c_void,
    }
}

/// Whether `col` holds exactly the buffers and lengths `node`'s format string promises:
/// the consumer trusts them, so a mismatch would be a read out of bounds, not an error.
fn check(node: &Node, col: &Col) -> Result<(), String> {
    let n = col.len();
    let bitmap = n.div_ceil(8);
    if col.nulls() > 0 && (col.validity.bits.len != n || col.validity.bits.bytes.len() < bitmap) {
        return Err("internal: validity of another length".into());
    }
    let offsets_fit = |offsets: &[i64], end: usize| {
        offsets.len() == n + 1 && offsets[0] == 0 && offsets[n] as usize == end
    };
    let fits = match (&node.ty, &col.data) {
        (Ty::Bool, Data::Bool(b)) => b.len == n && b.bytes.len() >= bitmap,
        (Ty::Int(IntOut::I32 | IntOut::Date), Data::I32(v)) => v.len() == n,
        (Ty::Int(IntOut::TimeMillis) | Ty::Long(_), Data::I64(v)) => v.len() == n,
        (Ty::Float, Data::F32(v)) => v.len() == n,
        (Ty::Double, Data::F64(v)) => v.len() == n,
        (Ty::DecBytes(..) | Ty::DecFixed(..), Data::Dec(v)) => v.len() == n,
        (Ty::Str | Ty::Bytes | Ty::Fixed(_), Data::Bin { offsets, values }) => {
            offsets_fit(offsets, values.len())
        }
        (Ty::Array(item, _), Data::List { offsets, child }) => {
            check(item, child)?;
            offsets_fit(offsets, child.len())
        }
        (Ty::Record(fields), Data::Struct(cols)) => {
            if fields.len() != cols.len() || cols.iter().any(|c| c.len() != n) {
                false
            } else {
                for ((_, f), c) in fields.iter().zip(cols) {
                    check(f, c)?;
                }
                true
            }
        }
        _ => false,
    };
    if fits {
        Ok(())
    } else {
        Err("internal: column of another type or length".into())
    }
}

fn export(col: Col) -> ArrowArray {
    let (len, nulls) = (col.len(), col.nulls());
    let validity = (nulls > 0).then_some(Owned::U8(col.validity.bits.bytes));
    match col.data {
        Data::Bool(b) => array(len, nulls, vec![validity, Some(Owned::U8(b.bytes))], vec![]),
        Data::I32(v) => array(len, nulls, vec![validity, Some(Owned::I32(v))], vec![]),
        Data::I64(v) => array(len, nulls, vec![validity, Some(Owned::I64(v))], vec![]),
        Data::F32(v) => array(len, nulls, vec![validity, Some(Owned::F32(v))], vec![]),
        Data::F64(v) => array(len, nulls, vec![validity, Some(Owned::F64(v))], vec![]),
        Data::Dec(v) => array(len, nulls, vec![validity, Some(Owned::I128(v))], vec![]),
        Data::Bin { offsets, values } => array(
            len,
            nulls,
            vec![validity, Some(Owned::I64(offsets)), Some(Owned::U8(values))],
            vec![],
        ),
        Data::List { offsets, child } => array(
            len,
            nulls,
            vec![validity, Some(Owned::I64(offsets))],
            vec![export(*child)],
        ),
        Data::Struct(cols) => array(
            len,
            nulls,
            vec![validity],
            cols.into_iter().map(export).collect(),
        ),
    }
}

/// A schema and an array made on a decoding thread and handed to the one holding the GIL:
/// they own plain Rust memory only.
pub struct Exported(ArrowSchema, ArrowArray);

// SAFETY: the structs and all they point to are owned by them (no thread-bound state); the
// release callbacks may run on any thread, as the interface requires
unsafe impl Send for Exported {}

impl Drop for Exported {
    fn drop(&mut self) {
        // SAFETY: structs made by `export_batch`; one moved into a capsule is marked released
        unsafe {
            release_schema(&mut self.0);
            release_array(&mut self.1);
        }
    }
}

/// The record batch of `cols` (checked against `fields` first; their vectors move in), or
/// `None` when a field name holds a NUL byte (a C string cannot carry it).
pub fn export_batch(
    fields: &[(String, Node)],
    cols: Vec<Col>,
    rows: usize,
) -> Result<Option<Exported>, String> {
    if fields.len() != cols.len() || cols.iter().any(|c| c.len() != rows) {
        return Err("internal: columns of another length".into());
    }
    for ((_, f), c) in fields.iter().zip(&cols) {
        check(f, c)?;
    }
    let Some(schema) = batch_schema(fields) else {
        return Ok(None);
    };
    let array = array(rows, 0, vec![None], cols.into_iter().map(export).collect());
    Ok(Some(Exported(schema, array)))
}

/// Release a boxed schema, then free the box.
unsafe fn free_schema(p: *mut ArrowSchema) {
    // SAFETY: the caller passes a box made by `capsules`, once
    unsafe {
        release_schema(p);
        drop(Box::from_raw(p));
    }
}

unsafe fn free_array(p: *mut ArrowArray) {
    // SAFETY: as `free_schema`
    unsafe {
        release_array(p);
        drop(Box::from_raw(p));
    }
}

/// Frees a capsule's struct (released first unless pyarrow imported it, which marks it
/// released); runs with the GIL held, from the capsule's deallocation.
unsafe extern "C" fn drop_schema_capsule(capsule: *mut ffi::PyObject) {
    // SAFETY: a capsule made by `capsules`, whose pointer is a boxed ArrowSchema
    unsafe {
        let p = ffi::PyCapsule_GetPointer(capsule, SCHEMA_CAPSULE.as_ptr()) as *mut ArrowSchema;
        if p.is_null() {
            ffi::PyErr_Clear();
        } else {
            free_schema(p);
        }
    }
}

unsafe extern "C" fn drop_array_capsule(capsule: *mut ffi::PyObject) {
    // SAFETY: as `drop_schema_capsule`, for a boxed ArrowArray
    unsafe {
        let p = ffi::PyCapsule_GetPointer(capsule, ARRAY_CAPSULE.as_ptr()) as *mut ArrowArray;
        if p.is_null() {
            ffi::PyErr_Clear();
        } else {
            free_array(p);
        }
    }
}

/// The two PyCapsules the Arrow PyCapsule protocol names; the structs move into them.
pub fn capsules(py: Python<'_>, mut exported: Exported) -> PyResult<(PyObject, PyObject)> {
    // SAFETY: each struct is copied into a box and the original marked released (a move, as
    // the interface allows), so exactly one owner releases it: the box's capsule, or the
    // code below when a capsule cannot be made
    unsafe {
        let schema = Box::into_raw(Box::new(ptr::read(&exported.0)));
        exported.0.release = None;
        let array = Box::into_raw(Box::new(ptr::read(&exported.1)));
        exported.1.release = None;
        let s = ffi::PyCapsule_New(
            schema as *mut c_void,
            SCHEMA_CAPSULE.as_ptr(),
            Some(drop_schema_capsule),
        );
        if s.is_null() {
            free_schema(schema);
            free_array(array);
            return Err(PyErr::fetch(py));
        }
        let s = PyObject::from_owned_ptr(py, s);
        let a = ffi::PyCapsule_New(
            array as *mut c_void,
            ARRAY_CAPSULE.as_ptr(),
            Some(drop_array_capsule),
        );
        if a.is_null() {
            free_array(array);
            return Err(PyErr::fetch(py));
        }
        Ok((s, PyObject::from_owned_ptr(py, a)))
    }
}
