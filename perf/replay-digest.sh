#!/usr/bin/env bash
# Replays every shipped config and every conformance case's inputs with `longhaul replay
# --out-dir` and prints one line per output pcap (sha256) and per counter dump: a digest to diff
# before and after a refactor that must not change behaviour (issue 13: byte-identical outputs).
#
#   perf/replay-digest.sh target/release/longhaul > before.txt   # on the old tree
#   perf/replay-digest.sh target/release/longhaul > after.txt    # on the new tree
#   diff before.txt after.txt                                    # empty = byte-identical
set -euo pipefail
BIN=${1:-target/release/longhaul}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TRACE="$ROOT/examples/roce-64flows.pcap"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

digest() { # name, then replay args
    local name=$1; shift
    local out="$work/$name"
    mkdir -p "$out"
    "$BIN" replay "$@" --out-dir "$out" > "$out/counters.txt"
    (cd "$out" && sha256sum -- *.pcap counters.txt | sed "s|^|$name |")
}

# Every shipped config, the embedded 64-flow trace on its first port (and on each port in turn
# for the small ones: enough to exercise routing, THEMIS, spraying and Bifrost paths).
for cfg in "$ROOT"/configs/*.toml; do
    base=$(basename "$cfg" .toml)
    ports=$(awk '/^\[\[ports\]\]/{inp=1;next} /^\[/{inp=0} inp && /^name *=/{gsub(/"/,"",$3);print $3}' "$cfg")
    for p in $ports; do
        digest "config-$base-$p" --config "$cfg" --in "$p=$TRACE"
    done
done
# Every conformance case: its config and inputs from case.toml.
for case in "$ROOT"/pcap-tests/cases/*/; do
    name=$(basename "$case")
    cfg=$(sed -n 's/^config *= *"\(.*\)"/\1/p' "$case/case.toml")
    args=(--config "$case/$cfg")
    while read -r port pcap; do
        args+=(--in "$port=$case/$pcap")
    done < <(awk '/^\[\[input\]\]/{p="";f=""} /^port *=/{gsub(/"/,"",$3);p=$3} /^pcap *=/{gsub(/"/,"",$3);f=$3; print p, f}' "$case/case.toml")
    digest "case-$name" "${args[@]}"
done
