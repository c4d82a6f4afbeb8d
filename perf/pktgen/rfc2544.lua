-- RFC 2544 throughput (section 26.1) through longhaul in the VM lab: for each frame size, a
-- binary search on Pktgen's rate (percent of line rate) for the highest rate at which every
-- frame sent on port 0 comes back on port 1 (through longhaul and the sink). Settings: see
-- common.lua (LH_SIZES, LH_TRIAL_MS, LH_SETTLE_MS, LH_RESOLUTION, LH_FLOWS, LH_PCAP, LH_OUT).
--
--   lh-pktgen /longhaul/perf/pktgen/rfc2544.lua
--
-- Writes LH_OUT (default /tmp/longhaul-rfc2544.csv) and prints the table; vagrant/README.md
-- says how to read it.

-- common.lua next to this script, wherever the repository is.
package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua;" .. package.path
require "Pktgen"
local lh = require "common"

local MAX_TRIALS = 20

local function search(size)
  local line = lh.line_pps(size)
  local lo, hi, rate = 0, 100, 100
  local best = nil
  local first = nil
  local trials = 0
  local short = false
  while trials < MAX_TRIALS do
    trials = trials + 1
    local asked = line * rate / 100
    local count = lh.count(asked)
    local tx, rx, _, achieved = lh.trial(size, rate, count)
    -- Pktgen did not offer the rate: it sent less, or slower or faster (by more than 0.5%).
    local gen_short = lh.short(tx, count, achieved, asked) ~= nil
    short = short or gen_short
    -- Frames never sent are not frames forwarded: a trial passes on what was sent, and its
    -- figure is the rate offered, not the rate asked.
    local passed = tx > 0 and rx >= tx
    if first == nil then first = { tx = tx, rx = rx, pps = achieved } end
    if passed and (best == nil or achieved > best.pps) then best = { pps = achieved } end
    if gen_short and achieved < asked then
      -- Nothing above what the generator offered can be tried: search below it.
      hi = math.min(hi, 100 * achieved / line)
    elseif gen_short then
      -- Offered faster than asked (not paced): the trial says nothing about this rate; below it.
      hi = rate
    elseif passed then
      lo = rate
      if rate >= 100 then break end
    else
      hi = rate
    end
    if hi - lo <= lh.resolution then break end
    rate = (lo + hi) / 2
  end
  return line, first, best, trials, short
end

lh.setup()
pktgen.delay(1000)
local f, path = lh.open_csv("rfc2544",
  "frame,line_rate_pps,zero_loss_rate_percent,zero_loss_pps,zero_loss_gbps,top_sent,top_lost,trials,generator_limited")
lh.printf("%8s %14s %10s %10s %9s %12s %7s\n", "frame", "zero-loss pps", "% of line", "Mpps", "Gb/s", "lost at top", "trials")
for _, size in ipairs(lh.sizes()) do
  local line, first, best, trials, short = search(size)
  local pps = best and best.pps or 0
  local pct = 100 * pps / line
  local gbps = pps * size * 8 / 1e9
  lh.printf("%8d %14.0f %9.2f%% %10.3f %9.3f %12d %7d%s\n", size, pps, pct, pps / 1e6, gbps,
    first.tx - first.rx, trials, short and "  generator could not offer the rate asked" or "")
  f:write(string.format("%d,%.0f,%.3f,%.0f,%.4f,%d,%d,%d,%s\n", size, line, pct, pps, gbps,
    first.tx, first.tx - first.rx, trials, tostring(short)))
  f:flush()
end
f:close()
lh.printf("wrote %s\n", path)
lh.done()
