-- Latency through longhaul in the VM lab (RFC 2544 section 26.2's idea, with Pktgen's latency
-- packets): for each frame size (LH_SIZES), traffic at LH_RATE percent of line rate (default 50:
-- below the throughput, as 26.2 asks; use the rate rfc2544.lua found) for LH_TRIAL_MS with
-- Pktgen's timestamped latency packets enabled on port 0; the latency statistics Pktgen keeps
-- on port 1 (where they come back) are written as they are, every field Pktgen reports.
--
--   LH_RATE=40 lh-pktgen /longhaul/perf/pktgen/latency.lua

-- common.lua next to this script, wherever the repository is.
package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua;" .. package.path
require "Pktgen"
local lh = require "common"

local rate = lh.number("LH_RATE", 50)
if rate > 100 then error("LH_RATE: at most 100 (percent of line rate)") end

-- "k=v;k=v" of a table's scalar fields, sorted (Pktgen's field names differ between releases).
local function fields(t)
  local keys = {}
  for k, v in pairs(t or {}) do
    if type(v) ~= "table" then keys[#keys + 1] = tostring(k) end
  end
  table.sort(keys)
  local out = {}
  for _, k in ipairs(keys) do out[#out + 1] = k .. "=" .. tostring(t[k]) end
  return table.concat(out, ";")
end

lh.setup()
pktgen.delay(1000)
local f, path = lh.open_csv("latency", "frame,rate_percent,asked,sent,received,generator_short,latency")
for _, size in ipairs(lh.sizes()) do
  pktgen.latency(lh.send, "enable")
  pktgen.latency(lh.recv, "enable")
  local asked = lh.line_pps(size) * rate / 100
  local count = lh.count(asked)
  local tx, rx, _, offered = lh.trial(size, rate, count)
  local short = lh.short(tx, count, offered, asked) ~= nil
  local stats = pktgen.pktStats(lh.recv)[tonumber(lh.recv)] or {}
  local lat = fields(stats.latency)
  pktgen.latency(lh.send, "disable")
  pktgen.latency(lh.recv, "disable")
  lh.printf("[%5dB] rate %.3f%%: sent %d of %d, received %d%s; latency %s\n", size, rate, tx, count, rx,
    short and " (generator off rate)" or "", lat)
  f:write(string.format("%d,%.3f,%d,%d,%d,%s,\"%s\"\n", size, rate, count, tx, rx, tostring(short), lat))
  f:flush()
end
f:close()
lh.printf("wrote %s\n", path)
lh.done()
