#!/usr/bin/env python3
"""perf/pktgen/real.sh's two helpers (the real Pktgen through `longhaul run` over memif).

  check.py poll LONGHAUL_ERR OUT PORT
      Reads the management API's address from longhaul's stderr, then polls GET /stats until
      longhaul stops, writing a line "taken_at_ns rx_pkts" to OUT each time the worker has
      published new counters (every control.stats_interval_ms): PORT's received frames and the
      worker's own clock when it counted them (taken_at_ns, monotonic). The rate longhaul
      received at is read from these lines, not from Pktgen's or this poller's clock.

  check.py run LABEL SCRIPT_LOG CSV LONGHAUL_OUT RX_TIMELINE SIZES
      Checks one script's run (see real.sh's header); prints PASS or FAIL and a summary, exits 1
      on FAIL.
"""
import http.client
import json
import re
import sys
import time


def poll(err_path, out_path, port):
    addr = None
    deadline = time.monotonic() + 60
    while addr is None:
        try:
            m = re.search(r"management API on http://([0-9.]+):(\d+)", open(err_path).read())
        except OSError:
            m = None
        if m:
            addr = (m.group(1), int(m.group(2)))
        elif time.monotonic() > deadline:
            return
        else:
            time.sleep(0.05)
    conn = None
    last = None
    failed = False
    with open(out_path, "w") as out:
        while True:
            try:
                if conn is None:
                    conn = http.client.HTTPConnection(*addr, timeout=5)
                conn.request("GET", "/stats")
                body = conn.getresponse().read()
                failed = False
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = None
                if failed:
                    return  # twice in a row, a new connection included: longhaul is gone
                failed = True
                continue
            try:
                workers = json.loads(body)["workers"]
            except (ValueError, KeyError, TypeError):
                workers = []
            if workers:
                taken = max(w["taken_at_ns"] for w in workers)
                rx = sum(p["rx_pkts"] for w in workers for p in w["ports"] if p["name"] == port)
                if taken != last:
                    out.write(f"{taken} {rx}\n")
                    out.flush()
                    last = taken
            time.sleep(0.003)


TRIAL = re.compile(r"^\[ *(\d+)B\] rate +([\d.]+)%: sent (\d+) of (\d+), (\d+) paced in ([\d.]+) s "
                   r"\((\d+) pps offered, (\d+) asked, burst (\d+)\), received (\d+), lost (-?\d+)"
                   r"(?: \(generator ([a-z]+)\))?$", re.M)
TOTALS = re.compile(r"^totals: sent (\d+) \((\d+) bytes\), received (\d+); port \d+ oerrors (\d+); "
                    r"port \d+ imissed (\d+), ierrors (\d+), rx_nombuf (\d+)", re.M)
# Pktgen's latency probes (latency.lua): LATENCY_PKT_SIZE, 72 B without the FCS (app/pktgen-latency.h).
PROBE_BYTES = 72
TOLERANCE = 0.01
PRIMING_PROBES = 16


def delivered(timeline, last, paced, probes, rate):
    """The rate longhaul received a trial's paced part at, by its own clock. The trial's frames
    end at longhaul's frame `last` (cumulative dc0 rx_pkts); its paced part is the last `paced`
    of them plus the latency probes sent with it (`probes`, their own rate added to `rate`).
    Its time runs from the first frame to the last on longhaul's clock: from the first to the
    last of longhaul's snapshots inside it, plus at each end the frames outside those two at
    `rate` (at most the 10 ms to the snapshot beyond: an error of second order). Snapshots
    inside are those past the first PRIMING_PROBES frames too (probes Pktgen sent while the
    trial was priming, a few a second, are counted in `probes`). Returns (snapshots inside,
    seconds, rate received less the probes'); None with fewer than two snapshots inside (the
    frames came in one lump)."""
    first = last - paced - probes
    inside = [(t / 1e9, n) for t, n in timeline if first + PRIMING_PROBES < n < last]
    if len(inside) < 2 or inside[-1][0] == inside[0][0]:
        return None
    before = [t / 1e9 for t, n in timeline if n <= first]
    after = [t / 1e9 for t, n in timeline if n >= last]
    (t0, n0), (t1, n1) = inside[0], inside[-1]
    head = (n0 - first) / rate
    tail = (last - n1) / rate
    if before:
        head = min(head, t0 - before[-1])
    if after:
        tail = min(tail, after[0] - t1)
    secs = t1 - t0 + head + tail
    probe_rate = probes / secs
    return len(inside), secs, (paced + probes) / secs - probe_rate


def run(label, log, csv, lh_out, timeline_path, sizes):
    sizes = [int(x) for x in sizes.split(",")]
    problems = []
    try:
        rows = open(csv).read().splitlines()
    except OSError as e:
        rows = []
        problems.append(f"no CSV: {e}")
    got = sorted(int(r.split(",")[0]) for r in rows[1:])
    if rows and got != sorted(sizes):
        problems.append(f"{csv} has rows for sizes {got}, not {sizes}")
    text = open(log).read()
    trials = [dict(size=int(m[0]), sent=int(m[2]), count=int(m[3]), paced=int(m[4]), secs=float(m[5]),
                   offered=int(m[6]), asked=int(m[7]), burst=int(m[8]), received=int(m[9]), flag=m[11])
              for m in TRIAL.findall(text)]
    if not trials:
        problems.append("no trial lines in the Pktgen log")
    tot = TOTALS.search(text)
    if not tot:
        problems.append("no totals line in the Pktgen log")
        tot = [0] * 7
    else:
        tot = [int(x) for x in tot.groups()]
    sent, obytes, received, oerrors, imissed, ierrors, nombuf = tot
    lh = {}
    for line in open(lh_out):
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            lh[parts[0]] = int(parts[1])
    c = lambda k: lh.get(k, 0)
    # Frames: longhaul received what Pktgen counted as sent, with the rows' sizes. Frames past a
    # trial's count are latency probes.
    exp_bytes = sum(min(t["sent"], t["count"]) * (t["size"] - 4) + max(t["sent"] - t["count"], 0) * PROBE_BYTES
                    for t in trials)
    if sum(t["sent"] for t in trials) != sent:
        problems.append(f"the trials' sent frames sum to {sum(t['sent'] for t in trials)}, the totals say {sent}")
    if c("port.dc0.rx_pkts") != sent:
        problems.append(f"longhaul port.dc0.rx_pkts {c('port.dc0.rx_pkts')} != Pktgen sent {sent}")
    if c("port.dc0.rx_bytes") != exp_bytes or obytes != exp_bytes:
        problems.append(f"bytes: longhaul port.dc0.rx_bytes {c('port.dc0.rx_bytes')}, Pktgen obytes {obytes}, "
                        f"the rows' sizes (FCS excluded) make {exp_bytes}")
    mean = c("port.dc0.rx_bytes") / max(c("port.dc0.rx_pkts"), 1) + 4
    # Rates: each trial Pktgen completed (its whole count sent) at the rate asked, by the
    # script's measure, was received by longhaul at that rate within 1%, by longhaul's clock.
    try:
        timeline = [tuple(int(x) for x in line.split()) for line in open(timeline_path) if line.strip()]
    except OSError:
        timeline = []
    checked, worst, worst_offered, skipped = 0, 0.0, 0.0, []
    before = 0
    for i, t in enumerate(trials, 1):
        before += t["sent"]
        name = f"trial {i} ({t['size']} B at {t['asked']} pps)"
        if t["flag"] or t["sent"] < t["count"]:
            skipped.append(f"{i}: {t['flag'] or 'short'}")
            continue
        probes = t["sent"] - t["count"]
        d = delivered(timeline, before, t["paced"], probes, t["asked"] + probes / t["secs"])
        if d is None:
            problems.append(f"{name}: longhaul received its {t['paced']} paced frames in one lump "
                            f"(fewer than two of its 10 ms snapshots inside), not over {t['secs']:.3f} s")
            continue
        snaps, dt, rate = d
        checked += 1
        dev = (rate - t["asked"]) / t["asked"]
        worst = max(worst, abs(dev))
        worst_offered = max(worst_offered, abs(rate - t["offered"]) / t["offered"])
        if abs(dev) > TOLERANCE:
            problems.append(f"{name}: longhaul received {rate:.0f} pps (its {t['paced']} paced frames in {dt:.4f} s "
                            f"of its clock, {snaps} snapshots), {100 * dev:+.2f}% off the rate Pktgen completed it at "
                            f"(the script measured {t['offered']} pps offered)")
    if trials and checked == 0:
        problems.append(f"no trial was checked for its rate: none ran at the rate asked ({', '.join(skipped)})")
    # Losses: every frame sent and not received is found in a counter.
    lost = sent - received
    inside = c("port.dc0.rx_pkts") - c("port.wan0.tx_pkts")
    egress = c("io.wan0.tx_errors")
    gen_side = imissed + ierrors + nombuf
    if lost != inside + egress + gen_side:
        problems.append(f"lost {lost} != longhaul inside {inside} (dc0 rx_pkts - wan0 tx_pkts) + io.wan0.tx_errors "
                        f"{egress} + Pktgen port 1 imissed+ierrors+rx_nombuf {gen_side}: "
                        f"{lost - inside - egress - gen_side} unaccounted")
    summary = (f"{len(trials)} trials, {checked} completed at the rate asked: longhaul received them at that rate "
               f"within {100 * worst:.2f}% by its clock (at the rate the script measured within {100 * worst_offered:.2f}%)"
               + (f", {len(skipped)} not at the rate asked ({'; '.join(skipped)})" if skipped else "")
               + f"; sent {sent} = longhaul dc0 rx; mean frame {mean:.1f} B on the wire, bytes = the rows' sizes; "
               f"lost {lost} = {inside} in longhaul + {egress} io.wan0.tx_errors (longhaul's memif tx into Pktgen) "
               f"+ {gen_side} at Pktgen port 1; oerrors {oerrors}")
    if problems:
        print(f"FAIL: {label}: " + "; ".join(problems))
        print(f"      ({summary})")
        return 1
    print(f"PASS: {label}: {summary}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "poll":
        poll(*sys.argv[2:])
    elif len(sys.argv) == 8 and sys.argv[1] == "run":
        sys.exit(run(*sys.argv[2:]))
    else:
        sys.exit(__doc__)
