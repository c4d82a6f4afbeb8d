#!/usr/bin/env bash
# Soak (issue 20): each shipped config runs live for a while on a looped trace, and its resident
# memory must stay flat after warm-up and its packet ledger must balance at the stop.
#
#   perf/soak.sh [--seconds N] [--bin PATH] [CONFIG ...]
#
# Defaults: 600 s per config, target/dist/longhaul, every configs/*.toml except DPDK ones.
# A config without port I/O gets the trace on its first DC port (dc0, else the first port) as a
# looped, paced pcap rx; the other ports stay null (tx into the void, counted). The management
# API and metrics move to ephemeral ports. Resident memory (VmRSS) is sampled every 5 s; the
# warm-up is the first fifth of the run. PASS: growth after warm-up < 1 MiB, no "packet
# conservation violated" at the stop, exit status 0. Figures: docs/soak.md.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=600
bin=target/dist/longhaul
configs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) configs+=("$1"); shift ;;
  esac
done
if [ ${#configs[@]} -eq 0 ]; then
  for c in configs/*.toml; do
    grep -q 'kind = "dpdk"' "$c" || configs+=("$c")
  done
fi
[ -x "$bin" ] || cargo build --profile dist --locked
work=$(mktemp -d /tmp/longhaul-soak.XXXXXX)
trap 'rm -rf "$work"' EXIT
root=$(pwd)

# The trace each pipeline understands (the baseline's RoCE trace for the rest).
trace_for() {
  case "$(grep -m1 '^pipeline' "$1")" in
    *spray*) echo "$root/perf/spray-64qps.pcap" ;;
    *reflex*) echo "$root/perf/reflex-64flows.pcap" ;;
    *) echo "$root/examples/roce-64flows.pcap" ;;
  esac
}

rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

printf '%-22s %8s %12s %12s %10s %10s %10s %s\n' config seconds "frames in" "frames out" "rss warm" "rss end" growth result
fail=0
for cfg in "${configs[@]}"; do
  name=$(basename "$cfg" .toml)
  tmp="$work/$name.toml"
  python3 - "$cfg" "$tmp" "$(trace_for "$cfg")" <<'EOF'
import os, re, sys
src, dst, trace = sys.argv[1:]
text = open(src).read()
base = os.path.dirname(os.path.abspath(src))
# Relative pcap paths in the file are relative to the config's directory: keep them working.
text = re.sub(r'(rx|tx) = "(\.\./[^"]+)"', lambda m: f'{m.group(1)} = "{base}/{m.group(2)}"', text)
if "io = {" not in text:
    blocks = text.split("[[ports]]")
    pick = next((i for i, b in enumerate(blocks[1:], 1) if re.search(r'^name = "dc0"', b, re.M)), 1)
    io = f'io = {{ kind = "pcap", rx = "{trace}", rx_loop = true, pace = true }}\n'
    blocks[pick] = "\n" + io + blocks[pick].lstrip("\n")
    text = "[[ports]]".join(blocks)
# Ephemeral API and metrics ports.
text = re.sub(r'(?m)^api_listen = .*$', 'api_listen = "127.0.0.1:0"', text)
text = re.sub(r'(?m)^metrics_listen = .*$', 'metrics_listen = "off"', text)
if "[control]" not in text:
    text += '\n[control]\napi_listen = "127.0.0.1:0"\nmetrics_listen = "off"\n'
open(dst, "w").write(text)
EOF
  "$bin" run --config "$tmp" --nonzero >"$work/$name.out" 2>"$work/$name.err" &
  pid=$!
  warm_at=$((seconds / 5)); warm=0; end=0; t=0
  while [ "$t" -lt "$seconds" ] && kill -0 "$pid" 2>/dev/null; do
    sleep 5; t=$((t + 5))
    r=$(rss_kib "$pid")
    [ "$t" -ge "$warm_at" ] && [ "$warm" = 0 ] && warm=$r
    end=$r
  done
  kill -INT "$pid" 2>/dev/null || true
  status=0; wait "$pid" || status=$?
  growth=$((end - warm))
  in=$(awk '/^run:/ {print $2}' "$work/$name.out")
  out=$(awk '/^run:/ {print $5}' "$work/$name.out")
  result=PASS
  if [ "$status" != 0 ]; then result="FAIL(exit $status)"; fi
  if grep -q "packet conservation violated" "$work/$name.err"; then result="FAIL(conservation)"; fi
  if [ "$growth" -ge 1024 ]; then result="FAIL(rss +${growth} KiB)"; fi
  [ "$result" = PASS ] || { fail=1; sed 's/^/    /' "$work/$name.err" | tail -5; }
  printf '%-22s %8s %12s %12s %9sK %9sK %9sK %s\n' "$name" "$t" "${in:-?}" "${out:-?}" "$warm" "$end" "$growth" "$result"
done
exit $fail
