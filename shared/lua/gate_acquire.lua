--[[ gate_acquire: reserve a start slot on the rate gate, or confirm one reserved earlier.
  GCRA with reservation: a caller that must wait is handed its own future slot and
  sleeps once, instead of polling. Decided on Redis' clock (TIME), all times in µs.
  Two schedules live in the state (see includes/gate_state.lua): next_reservation paces
  reservations at interval + tolerance, so that a holder up to the tolerance late holds
  nobody back, and next_start paces the starts that really happened at the interval, so
  that no two calls ever start closer than the interval (beyond a burst), whoever is late.
  Keys:
    K.gate    the gate's state hash
    K.health  the key-health circuit beside it (see includes/health_state.lua); read, and
              written only while it is open
  Input:
    ARGV[1]  interval, µs (> 0): the floor between two granted starts
    ARGV[2]  burst (>= 1)
    ARGV[3]  longest wait the caller accepts, µs (>= 0)
    ARGV[4]  slot reserved earlier and slept until, µs; 0 for a fresh request
    ARGV[5]  tolerance, µs (>= 0): how late a holder may confirm without costing anyone
    ARGV[6]  epoch the held slot came with; 0 for a fresh request
    ARGV[7]  how long an idle state is kept past its last time, ms (> 0)
    ARGV[8]  the endpoint the start is for (search or detail), or empty: a caller that
             never probes the key-health circuit
    ARGV[9]  the caller's probe window, µs (0 with an empty ARGV[8]): how long, at most,
             its call takes to be answered
  Output: { code, slot, now, cooldown_end, epoch, next_start_before, next_start_after,
            probe }
    code 0  GO: slot is granted (slot <= now); now and the two next_start values let the
            caller give the start back (gate_release) if it cannot send at once; probe 1
            when the start is the key-health circuit's probe
    code 1  WAIT: sleep (slot - now) µs, then call again with ARGV[4] = slot, ARGV[6] = epoch
    code 2  REFUSED: the wait would exceed ARGV[3], or the key-health circuit holds calls
            to this API (probe 2 then, and cooldown_end the later of the cooldown and the
            end of what the circuit holds); nothing new is reserved, and a held slot that is
            the newest reservation is handed back to the schedule
    next_start_before and next_start_after are 0 unless code is 0.
  Errors: CORRUPT, NEWER (see includes/gate_state.lua); nothing is granted.
  Confirming a held slot, rule by rule as the code names them (burst 1; with a larger
  burst, "a call" reads "burst calls"):
    slot_void            a cooldown set after the reservation ends later than the slot, or
                         the state that issued it is gone (deleted, evicted, failed over,
                         or idle past ARGV[7]): a fresh reservation at the back
    slot_ahead           before the slot: wait for it again
    room_to_start        at or after it, with no call started within the interval: go,
                         however late (the slot would otherwise stay idle); the next holder
                         is held back by what this one overran beyond the tolerance, and the
                         overrun shrinks by the tolerance per slot
    within_tolerance     held back by a call started within the interval, and this holder
    or predecessor_overran  is within the tolerance or that call started before this slot
                         (the one before overran): the slot moves back just far enough and
                         the caller waits
    otherwise            it slept past the tolerance while another call started in its
                         slot: a fresh reservation at the back
  The key-health circuit's probe: while the circuit is open, a start that could close it
  (any, for a refusal of the key; that endpoint's, for an API not granted) is its probe,
  and no other such start is granted until the probe's answer closes the circuit
  (key_accepted), refuses the key again (key_refused holds the gate), the probe is given
  back (gate_release) or ends with no answer (key_probe_over), or its window passes: the
  caller waits for that, or is refused, as for a cooldown. While a refusal of one API
  holds that API (key_refused), its callers are refused at once. Starts the circuit is not
  about go on at the interval. ]]
--- @include "gate_state"
local interval, burst, max_wait = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local held, tolerance, held_epoch = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local idle_ms = tonumber(ARGV[7])
local probe_endpoint, probe_window = ARGV[8] or '', tonumber(ARGV[9] or '') or 0
local GO, WAIT, REFUSED = 0, 1, 2
local HELD_BY_CIRCUIT = 2
local now = redis_now_us()
local st = read_state(now, interval, burst, tolerance)

local pace = interval + tolerance
-- How far ahead of the schedules a burst may reach.
local reservation_burst = (burst - 1) * pace
local start_burst = (burst - 1) * interval
-- The first moment a call may start: behind the cooldown and the last starts.
local earliest_start = math.max(st.next_start - start_burst, st.cooldown_end)
-- When the last call started (or later, with a burst).
local last_start = st.next_start - interval

-- A held slot given up while it is the newest reservation goes back to the schedule, so
-- the next fresh caller takes it instead of leaving it idle. True when it did.
local function hand_back_held()
  local newest_reservation = st.next_reservation - reservation_burst - pace
  if held > 0 and held == newest_reservation then
    st.next_reservation = st.next_reservation - pace
    held = 0
    return true
  end
  return false
end

-- held_off: the end of what holds the caller back beyond the cooldown (the key-health
-- circuit: a probe in flight, or a hold on one API), reported as the cooldown's end, and
-- the reply's last field 2; nil for none.
local function refuse(slot, held_off)
  if hand_back_held() or st.fresh then
    save_state(st, now, idle_ms)
  end
  if held_off then
    return { REFUSED, slot, now, math.max(st.cooldown_end, held_off), st.epoch, 0, 0, HELD_BY_CIRCUIT }
  end
  return { REFUSED, slot, now, st.cooldown_end, st.epoch, 0, 0, 0 }
end

local function wait(slot)
  return { WAIT, slot, now, st.cooldown_end, st.epoch, 0, 0, 0 }
end

local function within_bound(slot)
  if slot - now > max_wait then
    return refuse(slot)
  end
  return wait(slot)
end

-- While the key-health circuit is open and a start for this endpoint could close it: the
-- end of what holds such starts (µs), or 0 when this start would be the probe; and whether
-- that is a hold on one API (key_refused) rather than a probe in flight. nil when the
-- circuit is closed, or about another endpoint. A key of another type, or a hash this
-- release does not read, is no circuit this script keeps a probe in; a probe_until that is
-- not a time within the gate's horizon counts as none.
local function probe_in_flight()
  if probe_endpoint == '' or probe_window <= 0 then
    return nil
  end
  local kind = redis.call('TYPE', K.health).ok
  if kind ~= 'hash' then
    return nil
  end
  local f = redis.call('HMGET', K.health, 'v', 'scope', 'probe_until', 'probe_at')
  local scope = f[2]
  if f[1] ~= '1' or not (scope == 'any' or scope == 'search' or scope == 'detail') then
    -- Damaged, or a newer format: left to the key_* scripts, which name it; never written.
    return nil
  end
  if scope ~= 'any' and scope ~= probe_endpoint then
    return nil
  end
  local until_us = tonumber(f[3] or '')
  if until_us and until_us > now and until_us <= now + HORIZON then
    return until_us, not f[4]
  end
  return 0
end

-- Read once, before anything is reserved: a start the circuit holds takes no slot.
local probing, api_held = probe_in_flight()

-- probing is nil or 0 here: the circuit holds nothing this start is about.
local function go(slot)
  local next_start_before = st.next_start
  local start = math.max(st.next_start, now)
  local first_start_since_cooldown = now >= st.cooldown_end and st.cooldown_end > st.last_grant
  if first_start_since_cooldown then
    -- However late it comes, no burst right after a cooldown (or a fresh state's quiet).
    start = math.max(start, now + start_burst)
  end
  st.next_start = start + interval
  st.last_grant = now
  save_state(st, now, idle_ms)
  local probe = 0
  if probing then
    redis.call('HSET', K.health, 'probe_until', string.format('%.0f', now + probe_window),
      'probe_at', string.format('%.0f', now))
    probe = 1
  end
  return { GO, slot, now, st.cooldown_end, st.epoch, next_start_before, st.next_start, probe }
end

if probing and probing > 0 then
  -- A hold on this API lasts minutes: refused at once. A probe in flight: wait for its
  -- answer (or its window) like a cooldown, holding no slot meanwhile.
  if api_held or probing - now > max_wait then
    return refuse(probing, probing)
  end
  if hand_back_held() or st.fresh then
    save_state(st, now, idle_ms)
  end
  return wait(probing)
end

if held > 0 then
  local slot_void = st.epoch ~= held_epoch or held < st.cooldown_end
  if not slot_void then
    local slot_ahead = held > now
    local room_to_start = now >= earliest_start
    local within_tolerance = now - held <= tolerance
    local predecessor_overran = last_start < held
    if slot_ahead then
      return within_bound(held)
    elseif room_to_start then
      return go(held)
    elseif within_tolerance or predecessor_overran then
      return within_bound(earliest_start)
    end
  end
end

-- A fresh reservation at the back; nothing held is given back if it is refused.
held = 0
local paced = math.max(now, st.next_reservation - reservation_burst, st.cooldown_end)
local slot = math.max(paced, earliest_start)
if slot - now > max_wait then
  return refuse(slot)
end
st.next_reservation = math.max(st.next_reservation, now, st.cooldown_end + reservation_burst) + pace
local held_back_by_a_late_start = slot > paced
if held_back_by_a_late_start then
  -- The next reservation comes a pace after this slot, with no burst, as after a cooldown.
  st.next_reservation = math.max(st.next_reservation, slot + reservation_burst + pace)
end
if slot > now then
  save_state(st, now, idle_ms)
  return wait(slot)
end
return go(slot)
