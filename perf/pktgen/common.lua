-- Shared by the longhaul lab's Pktgen scripts (perf/pktgen/*.lua, vagrant/README.md).
--
-- The lab: Pktgen port 0 sends to longhaul's dc0, longhaul routes to the sink, the sink sends
-- everything back to Pktgen port 1. So a frame sent on port 0 and counted on port 1 went
-- through longhaul; loss = port 0 opackets - port 1 ipackets over a trial.
--
-- Settings come from the environment (lh-pktgen passes it through):
--   LH_SIZES      frame sizes, FCS included      (default 64,128,256,512,1024,1280,1518)
--   LH_TRIAL_MS   trial length                   (default 10000; RFC 2544 section 24: 60000)
--   LH_SETTLE_MS  wait after a trial for frames still in flight (default 2000, section 23)
--   LH_RESOLUTION stop the search when max - min < this many percent of line rate (default 0.5)
--   LH_FLOWS      flows (UDP source ports, RoCE-like: destination port 4791)  (default 64)
--   LH_DUT_MAC    longhaul's dc0                 (default 52:54:00:4c:02:01)
--   LH_OUT        CSV file written               (default /tmp/longhaul-<script>.csv)
--   LH_PCAP       1: send the RoCE trace Pktgen was started with (-s 0:FILE) instead of UDP

local M = {}

-- printf as Pktgen's own scripts use it (defined here so the scripts do not depend on it).
function M.printf(fmt, ...)
  io.write(string.format(fmt, ...))
  io.flush()
end

-- Leave Pktgen when a script is done (it would otherwise wait at its prompt).
function M.done()
  if pktgen.quit ~= nil then pktgen.quit() else os.exit(0) end
end

M.send = "0"
M.recv = "1"

local function env(name, default)
  local v = os.getenv(name)
  if v == nil or v == "" then return default end
  return v
end

function M.number(name, default)
  local v = tonumber(env(name, tostring(default)))
  if v == nil or v <= 0 then
    error(name .. ": not a positive number: " .. tostring(os.getenv(name)))
  end
  return v
end

function M.sizes()
  local out = {}
  for s in string.gmatch(env("LH_SIZES", "64,128,256,512,1024,1280,1518"), "[^,]+") do
    local n = tonumber(s)
    if n == nil or n < 64 or n > 1518 then
      error("LH_SIZES: " .. s .. " is not a frame size of 64 to 1518 bytes")
    end
    out[#out + 1] = math.floor(n)
  end
  return out
end

M.trial_ms = M.number("LH_TRIAL_MS", 10000)
M.settle_ms = M.number("LH_SETTLE_MS", 2000)
M.resolution = M.number("LH_RESOLUTION", 0.5)
M.flows = M.number("LH_FLOWS", 64)
M.dut_mac = env("LH_DUT_MAC", "52:54:00:4c:02:01")
M.pcap = env("LH_PCAP", "0") == "1"

function M.out_path(script)
  return env("LH_OUT", "/tmp/longhaul-" .. script .. ".csv")
end

-- The link speed Pktgen reports for port 0, in Mb/s (virtio says 10000 or more).
function M.link_mbps()
  local s = pktgen.linkState(M.send)[tonumber(M.send)]
  local mbps = tonumber(string.match(s or "", "%d+"))
  if mbps == nil or mbps == 0 then mbps = 10000 end
  return mbps
end

-- Frames per second at line rate for `size` (preamble, SFD and gap: 20 bytes).
function M.line_pps(size)
  return M.link_mbps() * 1e6 / ((size + 20) * 8)
end

-- RoCE-like UDP flows from the shipped traces' address plan: 10.0.0.1 -> 10.1.0.1, UDP
-- destination port 4791, one flow per source port (the traces use 64 QPs).
function M.setup()
  pktgen.stop("all")
  pktgen.reset("all")
  pktgen.set_type(M.send, "ipv4")
  pktgen.set_proto(M.send, "udp")
  pktgen.set_mac(M.send, "dst", M.dut_mac)
  pktgen.set_ipaddr(M.send, "src", "10.0.0.1/16")
  pktgen.set_ipaddr(M.send, "dst", "10.1.0.1")
  pktgen.set(M.send, "sport", 49152)
  pktgen.set(M.send, "dport", 4791)

  pktgen.range.dst_mac(M.send, "start", M.dut_mac)
  pktgen.range.src_ip(M.send, "start", "10.0.0.1")
  pktgen.range.src_ip(M.send, "inc", "0.0.0.0")
  pktgen.range.src_ip(M.send, "min", "10.0.0.1")
  pktgen.range.src_ip(M.send, "max", "10.0.0.1")
  pktgen.range.dst_ip(M.send, "start", "10.1.0.1")
  pktgen.range.dst_ip(M.send, "inc", "0.0.0.0")
  pktgen.range.dst_ip(M.send, "min", "10.1.0.1")
  pktgen.range.dst_ip(M.send, "max", "10.1.0.1")
  pktgen.range.src_port(M.send, "start", 49152)
  pktgen.range.src_port(M.send, "inc", 1)
  pktgen.range.src_port(M.send, "min", 49152)
  pktgen.range.src_port(M.send, "max", 49152 + M.flows - 1)
  pktgen.range.dst_port(M.send, "start", 4791)
  pktgen.range.dst_port(M.send, "inc", 0)
  pktgen.range.dst_port(M.send, "min", 4791)
  pktgen.range.dst_port(M.send, "max", 4791)
  pktgen.range.ttl(M.send, "start", 64)
  pktgen.range.ttl(M.send, "inc", 0)
  pktgen.range.ttl(M.send, "min", 64)
  pktgen.range.ttl(M.send, "max", 64)
  if M.pcap then
    pktgen.pcap(M.send, "on")
  else
    pktgen.set_range(M.send, "on")
  end
end

-- One trial: `count` frames of `size` bytes at `rate` percent of line rate on port 0. Returns
-- sent (port 0 opackets), received (port 1 ipackets) and the seconds port 0 took to send them.
function M.trial(size, rate, count)
  pktgen.clr()
  pktgen.set(M.send, "size", size - 4)   -- Pktgen's size excludes the FCS
  if not M.pcap then
    pktgen.range.pkt_size(M.send, "start", size - 4)
    pktgen.range.pkt_size(M.send, "inc", 0)
    pktgen.range.pkt_size(M.send, "min", size - 4)
    pktgen.range.pkt_size(M.send, "max", size - 4)
  end
  pktgen.set(M.send, "rate", rate)
  pktgen.set(M.send, "count", count)
  pktgen.start(M.send)
  pktgen.delay(M.trial_ms)
  -- Port 0 stops by itself after `count` frames; wait for that (at most another trial's time:
  -- past it the generator could not keep the rate, which the caller sees in the seconds).
  local waited = 0
  while waited < M.trial_ms do
    if pktgen.portStats(M.send, "port")[tonumber(M.send)].opackets >= count then break end
    pktgen.delay(100)
    waited = waited + 100
  end
  pktgen.stop(M.send)
  pktgen.delay(M.settle_ms)
  local tx = pktgen.portStats(M.send, "port")[tonumber(M.send)].opackets
  local rx = pktgen.portStats(M.recv, "port")[tonumber(M.recv)].ipackets
  return tx, rx, (M.trial_ms + waited) / 1000
end

function M.open_csv(script, header)
  local path = M.out_path(script)
  local f, err = io.open(path, "w")
  if f == nil then error("cannot write " .. path .. ": " .. tostring(err)) end
  f:write(header .. "\n")
  f:flush()
  return f, path
end

return M
