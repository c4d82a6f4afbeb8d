-- Shared by the longhaul lab's Pktgen scripts (perf/pktgen/*.lua, vagrant/README.md).
--
-- The lab: Pktgen port 0 sends to longhaul's dc0, longhaul routes to the sink, the sink sends
-- everything back to Pktgen port 1. So a frame sent on port 0 and counted on port 1 went
-- through longhaul; loss = port 0 opackets - port 1 ipackets over a trial.
--
-- Settings come from the environment (lh-pktgen passes it through):
--   LH_SIZES      frame sizes, FCS included (Pktgen's size is)  (default 64,128,256,512,1024,1280,1518)
--   LH_TRIAL_MS   trial length                   (default 10000; RFC 2544 section 24: 60000)
--   LH_SETTLE_MS  wait after a trial for frames still in flight (default 2000, section 23)
--   LH_RESOLUTION stop the search when max - min < this many percent of line rate (default 0.01)
--   LH_LINK_WAIT_MS  how long setup() waits for both links to come up (default 30000)
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

-- Every trial's frames, summed (trial() clears Pktgen's counters each time): what the
-- generator sent, what came back, and what Pktgen's own ports dropped or failed to send.
M.totals = { sent = 0, obytes = 0, received = 0, oerrors = 0, imissed = 0, ierrors = 0, rx_nombuf = 0 }

-- Leave Pktgen when a script is done (it would otherwise wait at its prompt), after a line with
-- the totals (perf/pktgen/real.sh balances them against longhaul's counters).
function M.done()
  local t = M.totals
  M.printf("totals: sent %d (%d bytes), received %d; port %s oerrors %d; port %s imissed %d, ierrors %d, rx_nombuf %d\n",
    t.sent, t.obytes, t.received, M.send, t.oerrors, M.recv, t.imissed, t.ierrors, t.rx_nombuf)
  if pktgen.quit ~= nil then pktgen.quit() else os.exit(0) end
end

M.send = "0"
M.recv = "1"
-- A port list every Pktgen release takes ("all" is an invalid portlist in 23.03.1).
M.ports = M.send .. "," .. M.recv
-- Pktgen refreshes portStats() once a second (its stats timer); isSending() is live.
M.STATS_TICK_MS = 1000

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
M.resolution = M.number("LH_RESOLUTION", 0.01)
M.link_wait_ms = M.number("LH_LINK_WAIT_MS", 30000)
M.flows = M.number("LH_FLOWS", 64)
M.dut_mac = env("LH_DUT_MAC", "52:54:00:4c:02:01")
M.pcap = env("LH_PCAP", "0") == "1"

function M.out_path(script)
  return env("LH_OUT", "/tmp/longhaul-" .. script .. ".csv")
end

-- Milliseconds on a clock that does not jump (Pktgen's Lua has no clock finer than os.time's
-- second; os.clock is the CPU time of the whole process, its busy-polling lcores included): the
-- kernel's monotonic clock in /proc/timer_list ("now at N nsecs"; readable by root, no fork),
-- else the wall clock from `date` (a fork of Pktgen's 4 GB process: 1 ms idle, tens of ms on a
-- loaded machine).
local timer_list = true
local function timer_list_ms()
  local f = io.open("/proc/timer_list", "r")
  if f == nil then return nil end
  local ns
  for _ = 1, 10 do
    local line = f:read("*l")
    if line == nil then break end
    ns = string.match(line, "^now at (%d+) nsecs")
    if ns then break end
  end
  f:close()
  return ns and tonumber(ns) / 1e6
end

function M.now_ms()
  if timer_list then
    local ms = timer_list_ms()
    if ms then return ms end
    timer_list = false
  end
  local p = io.popen("date +%s%N")
  local out = p and p:read("*l")
  if p then p:close() end
  local ns = tonumber(out or "")
  if ns == nil then error("cannot read the wall clock: `date +%s%N` printed " .. tostring(out)) end
  return ns / 1e6
end

local function port_value(t, port)
  if type(t) ~= "table" then return nil end
  return t[tonumber(port)]
end

-- Pktgen's link state string for a port: "<UP-100000-FD>" or "<--Down-->".
function M.link_state(port)
  return tostring(port_value(pktgen.linkState(port), port))
end

function M.link_up(port)
  return string.find(M.link_state(port), "^<UP") ~= nil
end

-- Whether the port is still sending (live; Pktgen clears it when `count` frames are out).
function M.sending(port)
  local v = port_value(pktgen.isSending(port), port)
  return v == "y" or v == true or v == 1
end

-- Waits for both ports' links (on memif the DUT's client connects after Pktgen starts).
function M.wait_links()
  local waited = 0
  while not (M.link_up(M.send) and M.link_up(M.recv)) do
    if waited >= M.link_wait_ms then
      error(string.format("link down after %d ms (LH_LINK_WAIT_MS): port %s %s, port %s %s; "
        .. "is the DUT running and connected to both ports?", waited, M.send,
        M.link_state(M.send), M.recv, M.link_state(M.recv)))
    end
    pktgen.delay(100)
    waited = waited + 100
  end
end

-- The link speed Pktgen reports for port 0, in Mb/s (read once, after the link is up).
local link_mbps = nil
function M.link_mbps()
  if link_mbps == nil then
    local mbps = tonumber(string.match(M.link_state(M.send), "^<UP%-(%d+)"))
    if mbps == nil or mbps == 0 then
      error("port " .. M.send .. ": no link speed in Pktgen's link state " .. M.link_state(M.send))
    end
    link_mbps = mbps
  end
  return link_mbps
end

-- Frames per second at line rate for `size` (preamble, SFD and gap: 20 bytes).
function M.line_pps(size)
  return M.link_mbps() * 1e6 / ((size + 20) * 8)
end

-- Pktgen's burst for a trial at `pps`: it sends a burst every burst / pps seconds (its pacing
-- tick; app/pktgen.c), and isSending() turns off one tick after the last burst. At most 64 (its
-- default), and small enough that a tick is at most 0.5 ms (at low rates a burst of 64 is a tick
-- of tens of ms: a trial's length would be off by that much).
function M.burst(pps)
  return math.max(1, math.min(64, math.floor(pps * 0.0005)))
end

-- Frames a trial sends at `pps`: a whole number of bursts, at least one (Pktgen's count 0 means
-- "send forever").
function M.count(pps)
  local b = M.burst(pps)
  return b * math.max(1, math.floor(pps * M.trial_ms / 1000 / b + 0.5))
end

-- RoCE-like UDP flows from the shipped traces' address plan: 10.0.0.1 -> 10.1.0.1, UDP
-- destination port 4791, one flow per source port (the traces use 64 QPs).
function M.setup()
  pktgen.stop(M.ports)
  pktgen.reset(M.ports)
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
  M.wait_links()
end

-- Frames port `port` has received so far, live (Pktgen counts each frame's size as it receives
-- it; portStats() is a snapshot once a second).
function M.received_live(port)
  local t = port_value(pktgen.portSizes(port), port) or {}
  local n = 0
  for _, k in ipairs({ "runt", "_64", "_65_127", "_128_255", "_256_511", "_512_1023", "_1024_1518", "jumbo" }) do
    n = n + (tonumber(t[k]) or 0)
  end
  return n
end

-- Each start() makes Pktgen rebuild the port's whole TX mempool (24,576 mbufs: app/pktgen.c
-- pktgen_setup_packets, flagged by pktgen_start_transmitting) before its first frame, 0.1 to
-- 0.8 s on a shared 2-core machine; its pacer then sends the bursts it owes back to back
-- (tx_next_cycle += tx_cycles). A trial started at its rate would open with a gap and then a
-- burst at Pktgen's top speed. So a trial starts primed: one frame a burst at PRIME_PPS (the
-- rebuild leaves a frame or two owed), and once a frame is back through the DUT (the rebuild is
-- over) the rate and burst become the trial's; its paced part runs from the next tick (at most
-- 0.2 s later: PRIME_PPS is 5 frames a second in Pktgen's whole-frame arithmetic).
M.PRIME_PPS = 5.5
M.PRIME_WAIT_MS = 5000

-- One trial: `count` frames of `size` bytes (FCS included, as Pktgen counts) at `rate` percent
-- of line rate on port 0. Returns sent (port 0 opackets), received (port 1 ipackets), the
-- seconds the paced part took and the frames in it: from the first paced frame back on port 1
-- until isSending() says port 0 stopped by itself after `count` frames, or until 1.25 times the
-- trial's time and a second (the generator could not offer the rate: it sent fewer than
-- `count`, which the caller sees). The priming frames (before the rate was set) are in sent, not in the paced part.
function M.trial(size, rate, count)
  pktgen.clr()
  pktgen.set(M.send, "size", size)
  if not M.pcap then
    pktgen.range.pkt_size(M.send, "start", size)
    pktgen.range.pkt_size(M.send, "inc", 0)
    pktgen.range.pkt_size(M.send, "min", size)
    pktgen.range.pkt_size(M.send, "max", size)
  end
  local asked = M.line_pps(size) * rate / 100
  local burst = M.burst(asked)
  pktgen.set(M.send, "count", count)
  pktgen.set(M.send, "burst", 1)
  pktgen.set(M.send, "rate", 100 * M.PRIME_PPS / M.line_pps(size))
  local base = M.received_live(M.recv)
  pktgen.start(M.send)
  -- Polls every millisecond; the clock is read at the events and every 50 polls for the limit
  -- (without root it is a fork of `date`).
  local polls = 0
  local function within(since, ms)
    polls = polls + 1
    return polls % 50 ~= 0 or M.now_ms() - since < ms
  end
  local start = M.now_ms()
  while M.received_live(M.recv) == base and M.sending(M.send) and within(start, M.PRIME_WAIT_MS) do
    pktgen.delay(1)
  end
  -- Frames the rebuild left owed go out back to back right after the first: let them arrive.
  pktgen.delay(20)
  local primed = M.received_live(M.recv) - base
  -- The rate first: at PRIME_PPS a burst of `burst` would be a tick of seconds, and a tick that
  -- fell between the two calls would hold the trial that long.
  pktgen.set(M.send, "rate", rate)
  pktgen.set(M.send, "burst", burst)
  local limit = 1.25 * M.trial_ms + 1000
  local t0 = M.now_ms()
  -- The first paced frame back (if none comes back: the time from the rate change).
  while M.received_live(M.recv) - base <= primed and M.sending(M.send) and within(t0, limit) do
    pktgen.delay(1)
  end
  if M.received_live(M.recv) - base > primed then t0 = M.now_ms() end
  while M.sending(M.send) and within(t0, limit) do
    pktgen.delay(1)
  end
  local t1 = M.now_ms()
  pktgen.stop(M.send)
  -- Frames in flight, then one more stats tick so the snapshot holds the whole trial.
  pktgen.delay(M.settle_ms + M.STATS_TICK_MS + 100)
  local out = pktgen.portStats(M.send, "port")[tonumber(M.send)]
  local back = pktgen.portStats(M.recv, "port")[tonumber(M.recv)]
  local tx, rx = out.opackets, back.ipackets
  local secs = math.max(t1 - t0, 1) / 1000
  local paced = math.max(math.min(tx, count) - primed, 0)
  local t = M.totals
  t.sent, t.obytes, t.received = t.sent + tx, t.obytes + (out.obytes or 0), t.received + rx
  t.oerrors = t.oerrors + (out.oerrors or 0)
  t.imissed = t.imissed + (back.imissed or 0)
  t.ierrors = t.ierrors + (back.ierrors or 0)
  t.rx_nombuf = t.rx_nombuf + (back.rx_nombuf or 0)
  local offered = paced / secs
  local flag = M.short(tx, count, offered, asked)
  M.printf("[%5dB] rate %8.4f%%: sent %d of %d, %d paced in %.3f s (%.0f pps offered, %.0f asked, burst %d), received %d, lost %d%s\n",
    size, rate, tx, count, paced, secs, offered, asked, burst, rx, tx - rx, flag and " (generator " .. flag .. ")" or "")
  return tx, rx, secs, offered
end

-- Whether a trial did not offer what it asked: "short" (fewer frames, or more than 0.5% below
-- the rate) or "over" (more than 0.5% above it: its frames went out faster than paced); nil when
-- it did. Half of the 1% perf/pktgen/real.sh holds a trial to on longhaul's clock: the other half
-- is the two clocks' error.
function M.short(tx, count, offered, asked)
  if tx < count or offered < asked * 0.995 then return "short" end
  if offered > asked * 1.005 then return "over" end
  return nil
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
