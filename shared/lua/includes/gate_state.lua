--[[ gate_state: read, check and write the gate's state hash. Included first by every gate
  script (see gate/scripts.rs), so the format is written once.
  Fields, µs on Redis' clock unless said:
    v      format version (2 since the interval became a floor; absent = 1, the release
           before, whose sat paced starts at interval − tolerance: read safely, as if the
           last start were an interval later than it says)
    tat    theoretical arrival time of the next reservation (paced at interval + tolerance)
    sat    the same for starts (paced at the interval: no two starts closer, beyond a burst)
    cool   cooldown end: no slot starts before it
    epoch  when this state was created: a slot is honoured only by the state that issued it
    g      when the last start was granted (0: none, or given back); identifies that grant
           to gate_release, and tells the first start after a cooldown
  A missing state is a fresh one: it opens with one interval of quiet (as a cooldown), so a
  deleted or evicted key, or a failover to a replica that never had it, never lets a call
  start right after the last one. (A replica holding an older copy is not a missing state:
  see docs/gate.md for what a failover cannot keep.)
  Errors:
    CORRUPT  a field is not a finite number in 0..2^53 (nan, inf, 1e400, text, negatives),
             or a time lies more than two days ahead (a damaged cooldown would otherwise
             hold the gate shut for years)
    NEWER    v is newer than this release understands: some instance runs newer code ]]
local GATE_VERSION = 2
local MAX_SAFE = 9007199254740992
-- No time in a sound state lies further ahead: a cooldown is capped at a day
-- (policy::RETRY_AFTER_CAP, which Gate::defer applies) and reservations at the longest wait.
local HORIZON = 2 * 86400 * 1000000
local rcall = redis.call

local function redis_now()
  local t = rcall('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- The field as a number, nil when absent, false when it is not a usable time.
local function as_time(raw)
  if not raw then
    return nil
  end
  local n = tonumber(raw)
  if not n or n ~= n or n < 0 or n > MAX_SAFE then
    return false
  end
  return n
end

-- { tat, sat, cool, epoch, g, fresh } or raises CORRUPT / NEWER; interval, burst and tolerance
-- (µs) shape the quiet of a fresh state and migrate a v1 one.
local function read_state(key, now, interval, burst, tolerance)
  local raw = rcall('HMGET', key, 'v', 'tat', 'sat', 'cool', 'epoch', 'g')
  local v = as_time(raw[1])
  local tat, sat, cool, epoch = as_time(raw[2]), as_time(raw[3]), as_time(raw[4]), as_time(raw[5])
  local g = as_time(raw[6])
  local far = now + HORIZON
  if v == false or tat == false or sat == false or cool == false or epoch == false or g == false
    or (v and (v < 1 or v ~= math.floor(v)))
    or (tat and tat > far) or (sat and sat > far) or (cool and cool > far) then
    error({ err = 'CORRUPT gate state in ' .. key .. ': v, tat, sat, cool, epoch and g must be finite '
      .. 'numbers in 0..2^53, and no time more than two days ahead; deleting the key costs one '
      .. 'interval of quiet and any cooldown in force' })
  end
  if v and v > GATE_VERSION then
    error({ err = 'NEWER gate state in ' .. key .. ': format ' .. string.format('%d', v)
      .. ', this release understands up to ' .. GATE_VERSION .. '; roll every instance to the same release' })
  end
  if not (tat or sat or cool or epoch) then
    -- Fresh: one interval of quiet, held like a cooldown (no burst at its end).
    cool = now + interval
    return { tat = cool + (burst - 1) * (interval + tolerance), sat = cool + (burst - 1) * interval,
      cool = cool, epoch = now, g = 0, fresh = true }
  end
  if (v or 1) < 2 and sat then
    -- v1's sat is the last start + (interval − its tolerance); that tolerance is unknown
    -- here but was below the interval, so a whole interval more is the safe reading.
    sat = sat + interval
  end
  return { tat = tat or 0, sat = sat or 0, cool = cool or 0, epoch = epoch or now, g = g or 0,
    fresh = false }
end

-- Writes the state and keeps it idle_ms past its last time, so a quiet gate keeps its
-- history (and its epoch) instead of opening with the quiet of a fresh one.
local function save_state(key, st, now, idle_ms)
  rcall('HSET', key, 'v', GATE_VERSION, 'tat', string.format('%.0f', st.tat),
    'sat', string.format('%.0f', st.sat), 'cool', string.format('%.0f', st.cool),
    'epoch', string.format('%.0f', st.epoch), 'g', string.format('%.0f', st.g))
  rcall('PEXPIRE', key, math.floor((math.max(st.tat, st.sat, st.cool) - now) / 1000) + idle_ms)
end
