--[[ include gate_state: read, check and write the gate's state hash K.gate. Every gate
  script includes it, so the format (and its version) is written once.
  In the hash (µs on Redis' clock unless said), and as read_state names them:
    v      format version (2 since the interval became a floor; absent = 1, the release
           before, whose sat paced starts at interval − tolerance: read safely, as if the
           last start were an interval later than it says)
    tat    next_reservation: where the next fresh reservation goes (reservations are paced
           at interval + tolerance; with a burst, up to burst − 1 paces earlier)
    sat    next_start: the earliest the next call may start (starts are paced at the
           interval, so no two are closer; with a burst, up to burst − 1 intervals earlier)
    cool   cooldown_end: no call starts before it
    epoch  epoch: when this state was created; a slot is honoured only by the state that
           issued it
    g      last_grant: when the last start was granted (0: none, or given back); it
           identifies that grant to gate_release, and tells the first start after a cooldown
  A missing state is a fresh one: it opens with one interval of quiet (as a cooldown), so a
  deleted or evicted key, or a failover to a replica that never had it, never lets a call
  start right after the last one. (A replica holding an older copy is not a missing state:
  see docs/gate.md for what a failover cannot keep.)
  Errors:
    CORRUPT  the key is not a hash, a field is not a finite number in 0..2^53 (nan, inf,
             1e400, text, negatives), or a time lies more than two days ahead (a damaged
             cooldown would otherwise hold the gate shut for years; epoch and g are never
             ahead of now in a sound state)
    NEWER    v is newer than this release understands: some instance runs newer code ]]
--- @include "clock"
local GATE_VERSION = 2
local MAX_SAFE = 9007199254740992
-- No time in a sound state lies further ahead: a cooldown is capped at a day
-- (policy::RETRY_AFTER_CAP, which Gate::defer applies) and reservations at the longest wait.
local HORIZON = 2 * 86400 * 1000000

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

-- { next_reservation, next_start, cooldown_end, epoch, last_grant, fresh }, or raises
-- CORRUPT / NEWER. interval, burst and tolerance (µs) shape the quiet of a fresh state and
-- the reading of a v1 one.
local function read_state(now, interval, burst, tolerance)
  local key = K.gate
  local kind = redis.call('TYPE', key).ok
  if kind ~= 'hash' and kind ~= 'none' then
    error({ err = 'CORRUPT gate state in ' .. key .. ': a ' .. kind .. ', not a hash; deleting the key '
      .. 'costs one interval of quiet and any cooldown in force' })
  end
  local raw = redis.call('HMGET', key, 'v', 'tat', 'sat', 'cool', 'epoch', 'g')
  local v, tat, sat = as_time(raw[1]), as_time(raw[2]), as_time(raw[3])
  local cool, epoch, g = as_time(raw[4]), as_time(raw[5]), as_time(raw[6])
  local far = now + HORIZON
  local unreadable = v == false or tat == false or sat == false or cool == false or epoch == false
    or g == false or (v and (v < 1 or v ~= math.floor(v)))
  local beyond_horizon = (tat and tat > far) or (sat and sat > far) or (cool and cool > far)
    or (epoch and epoch > far) or (g and g > far)
  if unreadable or beyond_horizon then
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
    local quiet_end = now + interval
    return { next_reservation = quiet_end + (burst - 1) * (interval + tolerance),
      next_start = quiet_end + (burst - 1) * interval, cooldown_end = quiet_end, epoch = now,
      last_grant = 0, fresh = true }
  end
  if (v or 1) < 2 and sat then
    -- v1's sat is the last start + (interval − its tolerance); that tolerance is unknown
    -- here but was below the interval, so a whole interval more is the safe reading.
    sat = sat + interval
  end
  return { next_reservation = tat or 0, next_start = sat or 0, cooldown_end = cool or 0,
    epoch = epoch or now, last_grant = g or 0, fresh = false }
end

-- Writes the state and keeps it idle_ms past its last time, so a quiet gate keeps its
-- history (and its epoch) instead of opening with the quiet of a fresh one.
local function save_state(st, now, idle_ms)
  local function whole(x)
    return string.format('%.0f', x)
  end
  redis.call('HSET', K.gate, 'v', GATE_VERSION, 'tat', whole(st.next_reservation),
    'sat', whole(st.next_start), 'cool', whole(st.cooldown_end), 'epoch', whole(st.epoch),
    'g', whole(st.last_grant))
  local last = math.max(st.next_reservation, st.next_start, st.cooldown_end)
  redis.call('PEXPIRE', K.gate, math.floor((last - now) / 1000) + idle_ms)
end
