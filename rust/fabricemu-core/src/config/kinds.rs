//! Tables whose `kind` selects their keys (`[topology]`, `[[workload]]`): the table is read once,
//! `kind` picks the struct of its kind (each `deny_unknown_fields`), and that struct is read from the
//! rest through `serde_path_to_error`, so an error keeps its key path (and from it, its line and
//! column). A key that belongs to another kind of the same table says so.
//!
//! An error inside a kind's struct crosses the outer deserializer as a custom message carrying its
//! inner key path between two [`MARK`]s; `locate` splits it off and appends it to the outer path.

use serde::de::{self, DeserializeOwned, Deserializer, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};

/// Separates an inner key path from its message inside a custom serde error.
pub const MARK: char = '\u{1f}';

/// A custom error message that carries the key path `path` (relative to the table being read).
pub fn marked(path: &str, message: &str) -> String {
    format!("{MARK}{path}{MARK}{message}")
}

/// Split a [`marked`] message into its inner path and message.
pub fn unmark(message: &str) -> Option<(&str, &str)> {
    let rest = message.strip_prefix(MARK)?;
    rest.split_once(MARK)
}

/// The keys of a derived struct (what its `Deserialize` passes to `deserialize_struct`).
pub fn field_names<T: DeserializeOwned>() -> &'static [&'static str] {
    struct Probe<'a>(&'a mut &'static [&'static str]);
    impl<'de> Deserializer<'de> for Probe<'_> {
        type Error = de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("probe"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(de::Error::custom("probe"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
            ignored_any
        }
    }
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Probe(&mut fields));
    fields
}

/// A table read whole: its `kind` and the other keys.
pub struct KindTable {
    pub kind: Value,
    pub rest: Value,
}

impl KindTable {
    pub fn read<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut map = Map::<String, Value>::deserialize(d)?;
        let kind = map
            .remove("kind")
            .ok_or_else(|| de::Error::missing_field("kind"))?;
        Ok(Self {
            kind,
            rest: Value::Object(map),
        })
    }

    /// The kind, as the enum `K` (`rename_all = "snake_case"`) reads it.
    pub fn kind<K: DeserializeOwned, E: de::Error>(&self) -> Result<K, E> {
        K::deserialize(&self.kind).map_err(|e| E::custom(marked("kind", &e.to_string())))
    }

    /// The other keys as kind `kind`'s struct `T`. `others` are the structs of the table's other
    /// kinds: a key of theirs is "unknown for kind = ..." rather than an unknown field.
    pub fn body<T: DeserializeOwned, E: de::Error>(
        self,
        kind: &str,
        others: &[&'static [&'static str]],
    ) -> Result<T, E> {
        serde_path_to_error::deserialize(self.rest).map_err(|e| {
            let path = path_of(e.path());
            let message = e.inner().to_string();
            let Some(key) = unknown_field_key(&message) else {
                return E::custom(marked(&path, &message));
            };
            let key = key.to_string();
            // The path of an unknown field may end with the field itself.
            let path = match path.strip_suffix(key.as_str()) {
                Some(parent) if parent.is_empty() || parent.ends_with('.') => {
                    parent.trim_end_matches('.').to_string()
                }
                _ => path,
            };
            let inner = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            if path.is_empty() && others.iter().any(|f| f.contains(&key.as_str())) {
                return E::custom(marked(
                    &inner,
                    &format!("unknown key for kind = \"{kind}\""),
                ));
            }
            let fields = if path.is_empty() {
                let mut all = vec!["kind"];
                all.extend_from_slice(field_names::<T>());
                all.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>()
            } else {
                return E::custom(marked(&inner, &message));
            };
            E::custom(marked(
                &inner,
                &format!(
                    "unknown field `{key}`, expected one of {}",
                    fields.join(", ")
                ),
            ))
        })
    }
}

/// A table whose `kind` selects its struct: `kind_table!(Name, KindEnum { Variant(Struct) = "name", ... })`
/// makes the kind enum, the table enum (serialised with `kind` first, then the struct's keys) and
/// its `Deserialize` through [`KindTable`].
macro_rules! kind_table {
    ($(#[$m:meta])* $name:ident, $kind:ident { $($variant:ident($body:ty) = $lit:literal),+ $(,)? }) => {
        /// The `kind` key of the table.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
        pub enum $kind {
            $(#[serde(rename = $lit)] $variant),+
        }

        impl $kind {
            pub fn name(self) -> &'static str {
                match self {
                    $($kind::$variant => $lit),+
                }
            }
        }

        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, serde::Serialize)]
        #[serde(tag = "kind")]
        pub enum $name {
            $(#[serde(rename = $lit)] $variant($body)),+
        }

        impl $name {
            pub fn kind(&self) -> $kind {
                match self {
                    $($name::$variant(_) => $kind::$variant),+
                }
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                use $crate::config::kinds::{field_names, KindTable};
                let table = KindTable::read(d)?;
                let kind: $kind = table.kind()?;
                let all: Vec<($kind, &'static [&'static str])> =
                    vec![$(($kind::$variant, field_names::<$body>())),+];
                let others: Vec<&'static [&'static str]> =
                    all.iter().filter(|(k, _)| *k != kind).map(|(_, f)| *f).collect();
                Ok(match kind {
                    $($kind::$variant => $name::$variant(table.body(kind.name(), &others)?)),+
                })
            }
        }
    };
}
pub(crate) use kind_table;

/// Dotted key path of a `serde_path_to_error` path: `workload[0].size` becomes `workload.0.size`, the
/// root (`.`) becomes the empty string.
pub fn path_of(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for seg in path.iter() {
        if !out.is_empty() {
            out.push('.');
        }
        match seg {
            Segment::Seq { index } => out.push_str(&index.to_string()),
            Segment::Map { key } => out.push_str(key),
            Segment::Enum { variant } => out.push_str(variant),
            Segment::Unknown => out.push('?'),
            #[allow(unreachable_patterns)]
            _ => out.push('?'),
        }
    }
    out
}

/// The key of serde's "unknown field `kk`, expected ..." message.
pub fn unknown_field_key(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown field `")?;
    let end = rest.find('`')?;
    Some(&rest[..end])
}
