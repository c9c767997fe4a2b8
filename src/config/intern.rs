//! Container definitions in a handoff state: written once each (format 2). It lives in config,
//! which owns the definitions, so that config and the core name no layer above them; the
//! handoff (`runtime::handoff`, which re-exports it as `specs`) opens and closes the table.
//!
//! A definition is held in four places — the config's pods, the core's pods, the core's
//! slots and the shell's slots — and the first format wrote each place out in full, so a new
//! instance parsed every definition four times (most of its reading time at 1,000
//! containers). Format 2 writes each distinct definition once, in a table ahead of the state
//! (`{"version":2,"specs":[...],"state":{...}}`), and every place writes its index in that
//! table; the reader parses the table first and shares its `Arc`s (one definition in memory,
//! as the old instance had).
//!
//! The places are the fields marked `#[serde(with = "crate::config::intern::…")]`
//! ([`vec`] on `PodSpec`'s container lists, [`arc`] on the slots' `spec`). Outside a handoff
//! write or read (no table on this thread: [`Writing`], [`Reading`]) they are plain serde,
//! and the reader takes a full definition (format 1) as well as an index.
//!
//! Must not: change what a definition is, or hold a table beyond one write or read (the
//! guards clear it, on error too).

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::config::spec::ContainerSpec;

enum Table {
    Writing(Interner),
    Reading(Vec<Arc<ContainerSpec>>),
}

thread_local! {
    static TABLE: RefCell<Option<Table>> = const { RefCell::new(None) };
}

/// The definitions met so far by a write: each distinct one gets the next index. An `Arc`
/// already met is known by its address (the shell's slot shares the core's); a definition
/// held by value (the config's, the core's pods') by its JSON text.
#[derive(Default)]
struct Interner {
    by_addr: HashMap<usize, u32>,
    by_text: HashMap<Vec<u8>, u32>,
    /// The table: `[` and each definition's JSON, comma-separated.
    json: Vec<u8>,
    count: u32,
}

impl Interner {
    fn index(&mut self, spec: &ContainerSpec, addr: Option<usize>) -> Result<u32, String> {
        if let Some(i) = addr.and_then(|a| self.by_addr.get(&a)) {
            return Ok(*i);
        }
        let text = serde_json::to_vec(spec).map_err(|e| e.to_string())?;
        let i = match self.by_text.get(&text) {
            Some(i) => *i,
            None => {
                let i = self.count;
                self.count += 1;
                self.json.push(if i == 0 { b'[' } else { b',' });
                self.json.extend_from_slice(&text);
                self.by_text.insert(text, i);
                i
            }
        };
        if let Some(a) = addr {
            self.by_addr.insert(a, i);
        }
        Ok(i)
    }
}

/// While alive, the definitions serialised on this thread go into a table ([`Writing::finish`]).
pub struct Writing(());

impl Writing {
    pub fn start() -> Writing {
        TABLE.with(|t| *t.borrow_mut() = Some(Table::Writing(Interner::default())));
        Writing(())
    }

    /// The table, as a JSON array.
    pub fn finish(self) -> Vec<u8> {
        let table = TABLE.with(|t| t.borrow_mut().take());
        match table {
            Some(Table::Writing(mut i)) => {
                if i.count == 0 {
                    i.json.push(b'[');
                }
                i.json.push(b']');
                i.json
            }
            _ => b"[]".to_vec(),
        }
    }
}

impl Drop for Writing {
    fn drop(&mut self) {
        TABLE.with(|t| t.borrow_mut().take());
    }
}

/// While alive, the indices deserialised on this thread are looked up in the table that
/// [`install`] read.
pub struct Reading(());

impl Reading {
    pub fn start() -> Reading {
        TABLE.with(|t| *t.borrow_mut() = Some(Table::Reading(Vec::new())));
        Reading(())
    }
}

impl Drop for Reading {
    fn drop(&mut self) {
        TABLE.with(|t| t.borrow_mut().take());
    }
}

/// `deserialize_with` for the table itself: reads it and makes it the one indices refer to.
pub fn install<'de, D: Deserializer<'de>>(d: D) -> Result<(), D::Error> {
    let specs: Vec<ContainerSpec> = Vec::deserialize(d)?;
    let specs = specs.into_iter().map(Arc::new).collect();
    TABLE.with(|t| *t.borrow_mut() = Some(Table::Reading(specs)));
    Ok(())
}

/// How a definition is written: its index while a [`Writing`] is alive, else in full.
fn write_one<S: Serializer>(
    spec: &ContainerSpec,
    addr: Option<usize>,
    s: S,
) -> Result<S::Ok, S::Error> {
    let index = TABLE.with(|t| match t.borrow_mut().as_mut() {
        Some(Table::Writing(i)) => Some(i.index(spec, addr)),
        _ => None,
    });
    match index {
        Some(Ok(i)) => s.serialize_u32(i),
        Some(Err(e)) => Err(serde::ser::Error::custom(e)),
        None => spec.serialize(s),
    }
}

/// A definition as read: an index into the table of this read (format 2), or in full
/// (format 1, or outside a handoff).
struct One;

impl<'de> Visitor<'de> for One {
    type Value = Arc<ContainerSpec>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a container definition or its index in the handoff's table")
    }

    fn visit_u64<E: de::Error>(self, i: u64) -> Result<Self::Value, E> {
        TABLE.with(|t| match t.borrow().as_ref() {
            Some(Table::Reading(specs)) => usize::try_from(i)
                .ok()
                .and_then(|i| specs.get(i))
                .cloned()
                .ok_or_else(|| {
                    E::custom(format!(
                        "container definition {i} is not in the table ({} definitions)",
                        specs.len()
                    ))
                }),
            _ => Err(E::custom(format!(
                "container definition {i}: an index outside a handoff state's table"
            ))),
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        ContainerSpec::deserialize(de::value::MapAccessDeserializer::new(map)).map(Arc::new)
    }
}

fn read_one<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<ContainerSpec>, D::Error> {
    d.deserialize_any(One)
}

/// `#[serde(with)]` for an `Arc<ContainerSpec>`.
pub mod arc {
    use super::*;

    pub fn serialize<S: Serializer>(spec: &Arc<ContainerSpec>, s: S) -> Result<S::Ok, S::Error> {
        write_one(spec, Some(Arc::as_ptr(spec) as usize), s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<ContainerSpec>, D::Error> {
        read_one(d)
    }
}

/// `#[serde(with)]` for a `Vec<Arc<ContainerSpec>>`.
pub mod vec {
    use super::*;

    pub fn serialize<S: Serializer>(specs: &[Arc<ContainerSpec>], s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        struct By<'a>(&'a Arc<ContainerSpec>);
        impl Serialize for By<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                write_one(self.0, Some(Arc::as_ptr(self.0) as usize), s)
            }
        }
        let mut seq = s.serialize_seq(Some(specs.len()))?;
        for spec in specs {
            seq.serialize_element(&By(spec))?;
        }
        seq.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<Arc<ContainerSpec>>, D::Error> {
        struct Many;
        impl<'de> Visitor<'de> for Many {
            type Value = Vec<Arc<ContainerSpec>>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of container definitions")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                struct Elem(Arc<ContainerSpec>);
                impl<'de> Deserialize<'de> for Elem {
                    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                        read_one(d).map(Elem)
                    }
                }
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
                while let Some(Elem(spec)) = seq.next_element()? {
                    out.push(spec);
                }
                Ok(out)
            }
        }
        d.deserialize_seq(Many)
    }
}
