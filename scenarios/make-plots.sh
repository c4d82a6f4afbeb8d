#!/usr/bin/env bash
# Regenerates the plots the README shows (docs/img/*.svg) from the paper scenarios:
#   scenarios/make-plots.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
plot() { # scenario, plot
    target/release/longhaul emulate "scenarios/$1.toml" --out-dir "$out/$1" > /dev/null
    cp "$out/$1/$2.svg" "docs/img/$1-$2.svg"
}
mkdir -p docs/img
plot themis-off fct_slowdown
plot themis fct_slowdown
plot spray-naive rates
plot spray-themis rates
plot bifrost-pfc queues
plot bifrost queues
plot reflex-timely-off fct_slowdown
plot reflex-timely-nopause fct_slowdown
ls -la docs/img
