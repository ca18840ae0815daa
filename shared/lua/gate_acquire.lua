--[[ gate_acquire: reserve a start slot on the rate gate, or confirm one reserved earlier.
  GCRA with reservation: a caller that must wait is handed its own future slot and
  sleeps once, instead of polling. Decided on Redis' clock (TIME), all times in µs.
  Two schedules live in the state (see includes/gate_state.lua): tat paces reservations at
  interval + tolerance, so that a holder up to the tolerance late holds nobody back, and
  sat paces the starts that really happened at the interval, so that no two calls ever
  start closer than the interval (beyond a burst), whoever is late.
  Input:
    KEYS[1]  gate state hash
    ARGV[1]  interval, µs (> 0): the floor between two granted starts
    ARGV[2]  burst (>= 1)
    ARGV[3]  longest wait the caller accepts, µs (>= 0)
    ARGV[4]  slot reserved earlier and slept until, µs; 0 for a fresh request
    ARGV[5]  tolerance, µs (>= 0): how late a holder may confirm without costing anyone
    ARGV[6]  epoch the held slot came with; 0 for a fresh request
    ARGV[7]  how long an idle state is kept past its last time, ms (> 0)
  Output: { code, slot, now, cool, epoch, sat_before, sat_after }
    code 0  go: slot is granted (slot <= now); now, sat_before and sat_after let the
            caller give the start back (gate_release) if it cannot send at once
    code 1  wait: sleep (slot - now) µs, then call again with ARGV[4] = slot, ARGV[6] = epoch
    code 2  refused: the wait would exceed ARGV[3]; nothing new is reserved, and a held
            slot that is the newest reservation is handed back to the schedule
    sat_before and sat_after are 0 unless code is 0.
  Errors: CORRUPT, NEWER (see includes/gate_state.lua); nothing is granted.
  Confirming a held slot (burst 1; with a larger burst, "a call" reads "burst calls"):
    - before it: wait for it again;
    - at or after it, with no call started within the interval: go, however late (the
      slot would otherwise stay idle); the next holder is held back by what this one
      overran beyond the tolerance, and the overrun shrinks by the tolerance per slot;
    - held back by a call started within the interval: when that call started before this
      slot (the one before overran) or this holder is within the tolerance, the slot
      moves back just far enough and the caller waits; when it started at or after this
      slot while this holder slept past the tolerance, a fresh reservation at the back.
  A held slot is void, and replaced by a fresh reservation at the back, when a cooldown
  set after its reservation ends later than it, or when the state that issued it is gone
  (deleted, evicted, failed over, or idle past ARGV[7]). ]]
local now = redis_now()
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local max_wait = tonumber(ARGV[3])
local held = tonumber(ARGV[4])
local tolerance = tonumber(ARGV[5])
local idle_ms = tonumber(ARGV[7])
local key = KEYS[1]
local st = read_state(key, now, interval, burst, tolerance)

local pace = interval + tolerance
local tau = (burst - 1) * pace
-- The first moment a call may start: behind the cooldown and the last starts.
local earliest = math.max(st.sat - (burst - 1) * interval, st.cool)

local function go(slot)
  local before = st.sat
  local base = math.max(st.sat, now)
  if now >= st.cool and st.cool > st.g then
    -- The first start since a cooldown (or a fresh state's quiet), however late: no burst
    -- right after it.
    base = math.max(base, now + (burst - 1) * interval)
  end
  st.sat = base + interval
  st.g = now
  save_state(key, st, now, idle_ms)
  return { 0, slot, now, st.cool, st.epoch, before, st.sat }
end

local function refuse(slot)
  -- A held slot given up while it is the newest reservation goes back to the schedule,
  -- so the next fresh caller takes it instead of leaving it idle.
  if held > 0 and st.tat - tau - pace == held then
    st.tat = st.tat - pace
    save_state(key, st, now, idle_ms)
  elseif st.fresh then
    save_state(key, st, now, idle_ms)
  end
  return { 2, slot, now, st.cool, st.epoch, 0, 0 }
end

local function wait(slot)
  return { 1, slot, now, st.cool, st.epoch, 0, 0 }
end

if held > 0 and st.epoch == tonumber(ARGV[6]) and held >= st.cool then
  if held > now then
    if held - now > max_wait then
      return refuse(held)
    end
    return wait(held)
  end
  if now >= earliest then
    return go(held)
  end
  -- sat - interval is the last start (or later, with a burst).
  if now - held <= tolerance or st.sat - interval < held then
    if earliest - now > max_wait then
      return refuse(earliest)
    end
    return wait(earliest)
  end
end

held = 0
local paced = math.max(now, st.tat - tau, st.cool)
local slot = math.max(paced, earliest)
if slot - now > max_wait then
  return refuse(slot)
end
st.tat = math.max(st.tat, now, st.cool + tau) + pace
if slot > paced then
  -- Held back by a late start, not by the reservations: the next one comes a pace after
  -- this slot, with no burst, as after a cooldown.
  st.tat = math.max(st.tat, slot + tau + pace)
end
if slot > now then
  save_state(key, st, now, idle_ms)
  return wait(slot)
end
return go(slot)
