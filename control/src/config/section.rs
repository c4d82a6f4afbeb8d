//! How a mechanism adds its own section to the configuration without the generic layer knowing
//! it: the [`Section`] trait (it produces a [`SectionConfig`], stored in
//! [`Config::sections`](super::Config)), and the [`Schema`] the parser is given: every
//! registered pipeline name and section (the registry implements it).
//!
//! A section is a top-level TOML table named after its mechanism (`[name]`). The generic pass
//! validates everything it knows first; then each registered section, in registry order, reads
//! its own table from the same text ([`Validator::raw`], so that its errors carry the same key
//! paths and line/column as every other) and validates it against the generic config
//! (ports, QoS, the selected pipeline). A table that no registered section claims is an unknown
//! key, like any other.

use super::sections::SectionConfig;
use super::validate::Validator;
use super::{Config, ConfigError, DEFAULT_PIPELINE};
use serde::de::DeserializeOwned;
use std::marker::PhantomData;
use std::sync::Arc;

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

/// The usual [`Section`]: the table `name` read as `R` (the serde struct mirroring it), then
/// `validate` (recording errors, `None` when absent or broken) makes the section's `C`.
pub struct TypedSection<R, C> {
    name: &'static str,
    validate: ValidateFn<R, C>,
    _types: PhantomData<fn() -> (R, C)>,
}

/// What a [`TypedSection`] calls to validate its table (`None`: the file has no such table).
pub type ValidateFn<R, C> = fn(&mut Validator<'_>, Option<&R>, &Config) -> Option<C>;

impl<R, C> TypedSection<R, C> {
    pub const fn new(name: &'static str, validate: ValidateFn<R, C>) -> Self {
        TypedSection {
            name,
            validate,
            _types: PhantomData,
        }
    }
}

impl<R: DeserializeOwned, C: SectionConfig + Clone> Section for TypedSection<R, C> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn validate(
        &self,
        v: &mut Validator<'_>,
        cfg: &Config,
    ) -> Result<Option<Arc<dyn SectionConfig>>, ConfigError> {
        let raw: Option<R> = v.raw(self.name)?;
        Ok((self.validate)(v, raw.as_ref(), cfg).map(|c| Arc::new(c) as Arc<dyn SectionConfig>))
    }
}

/// What the parser knows beyond the generic config: the values `switch.pipeline` may take and
/// the mechanisms' sections (validated in this order).
pub trait Schema {
    /// Registered pipeline names (`switch.pipeline` values).
    fn pipelines(&self) -> Vec<&'static str>;
    /// Registered sections.
    fn sections(&self) -> Vec<&dyn Section>;
}

/// The generic layer alone: the default pipeline and no sections (what [`Config::parse`] and
/// [`Config::load`] use; a build with mechanisms passes its registry to [`Config::parse_with`]).
pub struct GenericSchema;

impl Schema for GenericSchema {
    fn pipelines(&self) -> Vec<&'static str> {
        vec![DEFAULT_PIPELINE]
    }
    fn sections(&self) -> Vec<&dyn Section> {
        Vec::new()
    }
}
