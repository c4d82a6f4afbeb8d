//! A config's mechanism sections, validated: [`SectionConfig`] (what a mechanism's section
//! validates to) and [`Sections`] (every one a config has, found by type or name).

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

    /// Changes the section of type `T`, if present (tools, tests and benchmarks that derive a
    /// config from a file): `f` edits a copy, which then replaces it. Returns whether it was
    /// there. The result is not validated again.
    pub fn update<T: SectionConfig + Clone>(&mut self, f: impl FnOnce(&mut T)) -> bool {
        for (_, s) in self.0.iter_mut() {
            if let Some(t) = s.as_any().downcast_ref::<T>() {
                let mut t = t.clone();
                f(&mut t);
                *s = Arc::new(t);
                return true;
            }
        }
        false
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
        f.debug_map()
            .entries(self.0.iter().map(|(n, s)| (n, s)))
            .finish()
    }
}
