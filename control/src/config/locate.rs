//! Where a key is in a config file, for errors found after validation (by `run`, from a
//! validated [`Config`](super::Config) that no longer carries spans): `ports[0].io.rx_loop`
//! to "line 12, column 53" of the file's text, through `toml_edit`'s spans. A key written in a
//! table (`[ports.io]`), an inline table (`io = { ... }`) or as a dotted key is found alike.

use super::validate::location;
use std::ops::Range;
use std::path::Path;
use toml_edit::{ImDocument, Item, Table, Value};

/// One step of a key path.
enum Node<'a> {
    Item(&'a Item),
    Table(&'a Table),
    Value(&'a Value),
}

impl<'a> Node<'a> {
    fn child(&self, name: &str) -> Option<Node<'a>> {
        match *self {
            Node::Item(Item::Value(v)) | Node::Value(v) => match v {
                Value::InlineTable(t) => t.get(name).map(Node::Value),
                _ => None,
            },
            Node::Item(i) => i.as_table_like()?.get(name).map(Node::Item),
            Node::Table(t) => t.get(name).map(Node::Item),
        }
    }

    fn index(&self, i: usize) -> Option<Node<'a>> {
        match *self {
            Node::Item(Item::ArrayOfTables(a)) => a.get(i).map(Node::Table),
            Node::Item(Item::Value(Value::Array(a))) | Node::Value(Value::Array(a)) => {
                a.get(i).map(Node::Value)
            }
            _ => None,
        }
    }

    fn span(&self) -> Option<Range<usize>> {
        match self {
            Node::Item(i) => i.span(),
            Node::Table(t) => t.span(),
            Node::Value(v) => v.span(),
        }
    }
}

/// " (line L, column C)" of the value at `key` (a dotted path with array indices, as
/// [`ConfigError::key`](super::ConfigError::key) has it) in `text`; `None` when the key is not
/// in the text (a default) or the text does not parse.
pub fn key_location(text: &str, key: &str) -> Option<String> {
    let doc = ImDocument::parse(text).ok()?;
    let mut node = Node::Table(doc.as_table());
    for seg in key.split('.') {
        let (name, index) = match seg.split_once('[') {
            Some((n, rest)) => (n, Some(rest.strip_suffix(']')?.parse::<usize>().ok()?)),
            None => (seg, None),
        };
        node = node.child(name)?;
        if let Some(i) = index {
            node = node.index(i)?;
        }
    }
    Some(location(text, node.span()?.start))
}

/// `KEY (line L, column C)` for a message about `key` of the config file `file` (the place
/// left out when the key is not in the file, or the file cannot be read again).
pub fn key_at(file: &Path, key: &str) -> String {
    let loc = super::read_config_file(file, super::DEFAULT_RELOAD_MAX_BYTES)
        .ok()
        .and_then(|t| key_location(&t, key))
        .unwrap_or_default();
    format!("{key}{loc}")
}

/// `FILE: KEY (line L, column C)`: [`key_at`] with the file.
pub fn at_key(file: &Path, key: &str) -> String {
    format!("{}: {}", file.display(), key_at(file, key))
}

#[cfg(test)]
mod tests {
    use super::key_location;

    #[test]
    fn finds_keys_in_tables_inline_tables_and_arrays() {
        let text = "[switch]\nname = \"x\"\n\n[[ports]]\nname = \"a\"\n\n[[ports]]\nname = \"b\"\n\
                    io = { kind = \"pcap\", rx = \"in.pcap\", rx_loop = true }\n\n\
                    [[ports]]\nname = \"c\"\n[ports.io]\nkind = \"pcap\"\nrx = \"c.pcap\"\n\n\
                    [[routes]]\nnext_hops = [\"a\", \"b\"]\n";
        assert_eq!(
            key_location(text, "switch.name").as_deref(),
            Some(" (line 2, column 8)")
        );
        assert_eq!(
            key_location(text, "ports[1].io.rx_loop").as_deref(),
            Some(" (line 9, column 49)")
        );
        assert_eq!(
            key_location(text, "ports[2].io.rx").as_deref(),
            Some(" (line 15, column 6)")
        );
        assert_eq!(
            key_location(text, "routes[0].next_hops[1]").as_deref(),
            Some(" (line 18, column 19)")
        );
        assert_eq!(key_location(text, "ports[0].io.rx"), None);
        assert_eq!(key_location(text, "ports[9].name"), None);
    }
}
