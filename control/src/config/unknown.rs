//! Every unknown key at once. serde stops at the first unknown key (`deny_unknown_fields`), so
//! the parser removes that key from a working copy of the text and parses again, until no
//! unknown key is left ([`Unknowns`]); each error is then placed at its line in the original
//! file. The removal range comes from `toml_edit`'s spans: a `key = value` (a whole inline
//! entry, with its comma), or a whole table (its header and body).

use std::ops::Range;
use toml_edit::{ImDocument, InlineTable, Item, Table, Value};

/// At most this many unknown keys are collected (then the rest is reported as usual).
pub(super) const MAX_UNKNOWN: usize = 64;

/// Whether an error message is serde's "unknown field" (a key the schema does not have).
pub(super) fn is_unknown_key(msg: &str) -> bool {
    msg.starts_with("unknown field `")
}

/// The byte range to remove from `text` so that the key whose name spans `at` is gone, or
/// `None` when it cannot be found (the caller then stops collecting).
pub(super) fn removal(text: &str, at: usize) -> Option<Range<usize>> {
    let doc = ImDocument::parse(text).ok()?;
    in_table(doc.as_table(), text, at)
}

fn hits(span: Option<Range<usize>>, at: usize) -> bool {
    span.is_some_and(|s| s.start <= at && at < s.end.max(s.start + 1))
}

fn in_table(t: &Table, text: &str, at: usize) -> Option<Range<usize>> {
    for (name, item) in t.iter() {
        let key = t.key(name)?;
        if hits(key.span(), at) {
            let start = key.span()?.start;
            return match item {
                Item::Value(v) => Some(start..v.span()?.end),
                Item::Table(_) | Item::ArrayOfTables(_) => Some(table_block(text, start)),
                Item::None => None,
            };
        }
        let found = match item {
            Item::Table(sub) => in_table(sub, text, at),
            Item::ArrayOfTables(a) => a.iter().find_map(|sub| in_table(sub, text, at)),
            Item::Value(v) => in_value(v, text, at),
            Item::None => None,
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

fn in_value(v: &Value, text: &str, at: usize) -> Option<Range<usize>> {
    match v {
        Value::InlineTable(t) => in_inline(t, text, at),
        Value::Array(a) => a.iter().find_map(|v| in_value(v, text, at)),
        _ => None,
    }
}

fn in_inline(t: &InlineTable, text: &str, at: usize) -> Option<Range<usize>> {
    for (name, v) in t.iter() {
        let key = t.key(name)?;
        if hits(key.span(), at) {
            let mut r = key.span()?.start..v.span()?.end;
            // Take the entry's comma with it: the one after, or else the one before.
            let after = &text[r.end..];
            let ws = after.len() - after.trim_start().len();
            if after[ws..].starts_with(',') {
                r.end += ws + 1;
            } else {
                let before = &text[..r.start];
                let trimmed = before.trim_end();
                if trimmed.ends_with(',') {
                    r.start = trimmed.len() - 1;
                }
            }
            return Some(r);
        }
        if let Some(r) = in_value(v, text, at) {
            return Some(r);
        }
    }
    None
}

/// A table whose header holds byte `key_at`: from the header's line to the next header line
/// (or the end of the text).
fn table_block(text: &str, key_at: usize) -> Range<usize> {
    let start = text[..key_at].rfind('\n').map_or(0, |i| i + 1);
    let body = text[key_at..]
        .find('\n')
        .map_or(text.len(), |i| key_at + i + 1);
    let mut end = body;
    for line in text[body..].split_inclusive('\n') {
        if line.trim_start().starts_with('[') {
            break;
        }
        end += line.len();
    }
    start..end
}

/// The ranges removed so far, in the original text's offsets, to map a working offset back.
#[derive(Default)]
pub(super) struct Unknowns {
    /// (start in the original, length), sorted by start.
    removed: Vec<(usize, usize)>,
}

impl Unknowns {
    /// The original offset of working offset `w`.
    pub(super) fn original(&self, w: usize) -> usize {
        let mut o = w;
        for &(s, len) in &self.removed {
            if s <= o {
                o += len;
            }
        }
        o
    }

    /// Remove working range `r` from `work`, remembering it.
    pub(super) fn remove(&mut self, work: &mut String, r: Range<usize>) {
        let start = self.original(r.start);
        let len = r.end - r.start;
        work.replace_range(r, "");
        let i = self.removed.partition_point(|&(s, _)| s < start);
        self.removed.insert(i, (start, len));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strip(text: &str, key: &str) -> String {
        let at = text.find(key).unwrap();
        let r = removal(text, at).unwrap();
        let mut s = text.to_owned();
        s.replace_range(r, "");
        s
    }

    #[test]
    fn removes_a_key_an_inline_entry_or_a_table() {
        assert_eq!(
            strip("a = 1\nbogus = [1,\n 2]\nb = 2\n", "bogus"),
            "a = 1\n\nb = 2\n"
        );
        assert_eq!(
            strip("io = { kind = \"pcap\", bogus = 1, rx = \"x\" }\n", "bogus"),
            "io = { kind = \"pcap\",  rx = \"x\" }\n"
        );
        assert_eq!(
            strip("io = { kind = \"pcap\", bogus = 1 }\n", "bogus"),
            "io = { kind = \"pcap\" }\n"
        );
        assert_eq!(
            strip(
                "[a]\nx = 1\n[bogus]\ny = 2\nz = 3\n\n[[c]]\nw = 1\n",
                "bogus"
            ),
            "[a]\nx = 1\n[[c]]\nw = 1\n"
        );
        assert_eq!(
            strip("[[p]]\nid = 0\n[[p]]\nid = 1\nbogus = \"x\"\n", "bogus"),
            "[[p]]\nid = 0\n[[p]]\nid = 1\n\n"
        );
    }

    #[test]
    fn offsets_map_back_to_the_original() {
        let mut u = Unknowns::default();
        let mut w = "0123456789".to_owned();
        u.remove(&mut w, 2..4); // "01456789"
        assert_eq!(w, "01456789");
        assert_eq!(u.original(2), 4);
        u.remove(&mut w, 0..1); // "1456789": original 0 removed too
        assert_eq!(w, "1456789");
        assert_eq!(u.original(0), 1);
        assert_eq!(u.original(1), 4);
        assert_eq!(u.original(6), 9);
    }
}
