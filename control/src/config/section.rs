//! How a mechanism adds its own section to the configuration without the generic layer knowing
//! it: the [`Section`] trait and the validated value it produces ([`SectionConfig`], stored in
//! [`Config::sections`](super::Config)). The parser is given every registered section by a
//! [`Mechanisms`](crate::mechanisms::Mechanisms) (the registry).
//!
//! A section is a top-level TOML table named after its mechanism (`[name]`). The generic pass
//! validates everything it knows first; then each registered section, in registry order, reads
//! its own table from the same text ([`Validator::raw`], so that its errors carry the same key
//! paths and line/column as every other) and validates it against the generic config
//! (ports, QoS, the selected pipeline). A table that no registered section claims is an unknown
//! key, like any other.

use super::validate::Validator;
use super::{Config, ConfigError};
use serde::de::{self, DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use std::any::Any;
use std::fmt;
use std::sync::Arc;

/// A mechanism's validated configuration section. Implemented for every type that is
/// `Clone + PartialEq + Debug + Send + Sync + 'static`.
pub trait SectionConfig: Any + fmt::Debug + Send + Sync {
    fn as_any(&self) -> &dyn Any;
    /// Equal to `other` (same type, equal value): a reload that changes a section rebuilds.
    fn eq_dyn(&self, other: &dyn SectionConfig) -> bool;
}

impl<T: Any + fmt::Debug + Clone + PartialEq + Send + Sync> SectionConfig for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn eq_dyn(&self, other: &dyn SectionConfig) -> bool {
        other.as_any().downcast_ref::<T>() == Some(self)
    }
}

/// What the parser asks of a mechanism with a configuration section.
pub trait Section: Send + Sync {
    /// The top-level table (`[name]` in the file): the mechanism's name.
    fn name(&self) -> &'static str;

    /// Read the section from the file (`v.raw::<RawX>(self.name())?`, `None` when the file has
    /// no such table) and validate it against the generic `cfg`, recording every problem with
    /// [`Validator::err`] and friends. Returns the validated section, or `None` when it is
    /// absent (or broken: errors are then recorded). `Err` only for a syntax or type error in
    /// the table (from `raw`), which stops parsing.
    fn validate(
        &self,
        v: &mut Validator<'_>,
        cfg: &Config,
    ) -> Result<Option<Arc<dyn SectionConfig>>, ConfigError>;
}

/// The validated sections of a config, by name, in registry order.
#[derive(Clone, Default)]
pub struct Sections(pub(super) Vec<(&'static str, Arc<dyn SectionConfig>)>);

impl Sections {
    /// The section of type `T`, if the config has it.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.0
            .iter()
            .find_map(|(_, s)| s.as_any().downcast_ref::<T>())
    }

    /// The section named `name` (its table), if the config has it.
    pub fn by_name(&self, name: &str) -> Option<&dyn SectionConfig> {
        self.0
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, s)| s.as_ref())
    }

    /// Names of the sections present.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.0.iter().map(|(n, _)| *n)
    }
}

impl PartialEq for Sections {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len()
            && self
                .0
                .iter()
                .zip(other.0.iter())
                .all(|((a, x), (b, y))| a == b && x.eq_dyn(y.as_ref()))
    }
}

impl fmt::Debug for Sections {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.0.iter().map(|(n, s)| (n, s))).finish()
    }
}

/// Deserializes the value of top-level key `name` of a TOML document as `T` (spans kept),
/// skipping every other key.
pub(super) struct Pick<'a, T> {
    pub name: &'a str,
    pub _t: std::marker::PhantomData<T>,
}

impl<'de, T: DeserializeOwned> DeserializeSeed<'de> for Pick<'_, T> {
    type Value = Option<T>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, T: DeserializeOwned> Visitor<'de> for Pick<'_, T> {
    type Value = Option<T>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a table")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<T>, A::Error> {
        let mut out = None;
        while let Some(k) = map.next_key::<String>()? {
            if k == self.name {
                out = Some(map.next_value::<T>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(out)
    }
}

