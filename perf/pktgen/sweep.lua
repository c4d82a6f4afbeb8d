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
local f, path = lh.open_csv("sweep", "frame,rate_percent,sent,received,lost,loss_percent,rx_pps,rx_gbps")
lh.printf("%8s %12s %12s %10s %8s %10s %9s\n", "frame", "sent", "received", "lost", "loss %", "rx Mpps", "rx Gb/s")
for _, size in ipairs(lh.sizes()) do
  local count = math.floor(lh.line_pps(size) * rate / 100 * lh.trial_ms / 1000)
  local tx, rx, secs = lh.trial(size, rate, count)
  local lost = tx - rx
  local loss = tx > 0 and 100 * lost / tx or 0
  local pps = rx / secs
  lh.printf("%8d %12d %12d %10d %7.3f%% %10.3f %9.3f\n", size, tx, rx, lost, loss, pps / 1e6, pps * size * 8 / 1e9)
  f:write(string.format("%d,%.3f,%d,%d,%d,%.4f,%.0f,%.4f\n", size, rate, tx, rx, lost, loss, pps, pps * size * 8 / 1e9))
  f:flush()
end
f:close()
lh.printf("wrote %s\n", path)
lh.done()
