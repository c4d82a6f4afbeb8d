-- A stand-in for Pktgen's Lua API, so the lab's scripts can be run (and tested in CI) without
-- Pktgen, NICs or VMs: port 0's frames go through a modeled device that forwards at most
-- MOCK_CAP_PPS frames per second (the rest are lost) to port 1, and the generator itself offers
-- at most MOCK_GEN_PPS. The link is 10 Gb/s.
--
--   MOCK_CAP_PPS=1000000 LH_SIZES=64,1518 LH_TRIAL_MS=1000 LH_SETTLE_MS=1 LH_OUT=/tmp/x.csv \
--     lua5.3 -e 'dofile("perf/pktgen/mock_pktgen.lua")' perf/pktgen/rfc2544.lua
--
-- perf/pktgen/test.sh checks the scripts' results against the modeled capacity this way.

local cap = tonumber(os.getenv("MOCK_CAP_PPS") or "1000000")
local gen_max = tonumber(os.getenv("MOCK_GEN_PPS") or "1e12")
local link_mbps = 10000
local state = { size = {}, rate = {}, count = {}, tx = { [0] = 0, [1] = 0 }, rx = { [0] = 0, [1] = 0 } }
local noop = function() end

pktgen = setmetatable({}, { __index = function() return noop end })
pktgen.range = setmetatable({}, { __index = function() return noop end })
pktgen.linkState = function(_) return { [0] = "<UP-" .. link_mbps .. "-FD>", [1] = "<UP-" .. link_mbps .. "-FD>" } end
pktgen.set = function(port, key, value) state[key] = state[key] or {}; state[key][tonumber(port)] = value end
pktgen.clr = function() state.tx = { [0] = 0, [1] = 0 }; state.rx = { [0] = 0, [1] = 0 } end
pktgen.start = function(port)
  local p = tonumber(port)
  local size = state.size[p] + 4
  local line = link_mbps * 1e6 / ((size + 20) * 8)
  local offered = math.min(line * state.rate[p] / 100, gen_max)
  local count = state.count[p]
  -- A generator slower than asked sends fewer frames in the trial's time.
  local trial_s = tonumber(os.getenv("LH_TRIAL_MS") or "10000") / 1000
  local sent = math.min(count, math.floor(offered * trial_s * 2))
  state.tx[p] = sent
  local through = offered <= cap and sent or math.floor(sent * cap / offered)
  state.rx[1 - p] = through
end
pktgen.portStats = function(port, _)
  local p = tonumber(port)
  return { [p] = { opackets = state.tx[p], ipackets = state.rx[p] } }
end
pktgen.pktStats = function(port)
  local p = tonumber(port)
  return { [p] = { latency = { num_pkts = state.rx[p] > 0 and 100 or 0, avg_us = 12 } } }
end
package.preload["Pktgen"] = function() return {} end
