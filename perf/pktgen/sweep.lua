-- Frame-size sweep through longhaul in the VM lab: each size (LH_SIZES) at one fixed rate
-- (LH_RATE, percent of line rate, default 100) for LH_TRIAL_MS; sent, received, lost, and the
-- received rate. With LH_PCAP=1 and Pktgen started with `-s 0:/var/lib/longhaul-lab/roce-64flows.pcap`
-- the shipped RoCE trace is sent instead (its own sizes; LH_SIZES then names the rate's basis).
--
--   LH_RATE=50 lh-pktgen /longhaul/perf/pktgen/sweep.lua

-- common.lua next to this script, wherever the repository is.
package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua;" .. package.path
require "Pktgen"
local lh = require "common"

local rate = lh.number("LH_RATE", 100)
if rate > 100 then error("LH_RATE: at most 100 (percent of line rate)") end

lh.setup()
pktgen.delay(1000)
local f, path = lh.open_csv("sweep",
  "frame,rate_percent,asked,sent,received,lost,loss_percent,offered_pps,rx_pps,rx_gbps,generator_short")
lh.printf("%8s %12s %12s %12s %10s %8s %11s %9s\n", "frame", "asked", "sent", "received", "lost", "loss %", "offered Mpps", "rx Gb/s")
for _, size in ipairs(lh.sizes()) do
  local asked = lh.line_pps(size) * rate / 100
  local count = lh.count(asked)
  local tx, rx, _, offered = lh.trial(size, rate, count)
  local lost = tx - rx
  local pps = tx > 0 and offered * rx / tx or 0
  -- A trial that did not send what the rate asks has no loss figure at that rate.
  local short = lh.short(tx, count, offered, asked) ~= nil
  local loss = (not short) and string.format("%.4f", 100 * lost / tx) or ""
  lh.printf("%8d %12d %12d %12d %10d %8s %11.3f %9.3f%s\n", size, count, tx, rx, lost,
    short and "-" or loss, offered / 1e6, pps * size * 8 / 1e9,
    short and string.format("  generator off rate: sent %d of %d at %.0f of %.0f pps", tx, count, offered, asked) or "")
  f:write(string.format("%d,%.3f,%d,%d,%d,%d,%s,%.0f,%.0f,%.4f,%s\n", size, rate, count, tx, rx, lost, loss,
    offered, pps, pps * size * 8 / 1e9, tostring(short)))
  f:flush()
end
f:close()
lh.printf("wrote %s\n", path)
lh.done()
