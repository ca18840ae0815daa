--[[ key_refused: law.go.kr refused the key: opens the key-health circuit (or counts one
  more refusal of an open one) and holds off the calls it is about for the probe interval,
  in one step, so that no circuit is ever open without its hold. A refusal of the key
  itself (scope any) holds the key's whole gate; a refusal of one API (scope search or
  detail) holds the calls to that API alone, in the circuit (probe_until, as a probe in
  flight that no one can end; see gate_acquire), and the other API goes on. Decided on
  Redis' clock. While the circuit is open, gate_acquire lets one probe out at a time; a
  refusal is the answer of the probe in flight, if any.
  Keys:
    K.health   the circuit's hash (see includes/health_state.lua)
    K.alerted  the kind of the last opening whose alert was delivered (key_alert
               delivered), kept as long as the circuit is: a circuit that closes and opens
               again for the same reason within that time owes no second alert
    K.gate     the key's gate state (see includes/gate_state.lua)
  Input:
    ARGV[1]  the refusal's kind: 1-40 of a-z and _ (KeyProblem::kind)
    ARGV[2]  its scope: search or detail (an API the key is not granted), any (the key)
    ARGV[3]  how long the circuit is kept after its last refusal, ms (whole, >= 1)
    ARGV[4]  the hold: the gate's cooldown from now, µs (whole, >= 1)
    ARGV[5]  the gate's interval, µs (whole, >= 1)
    ARGV[6]  the gate's burst (whole, >= 1)
    ARGV[7]  the gate's tolerance, µs (whole, >= 0)
    ARGV[8]  how long an idle gate state is kept past its last time, ms (whole, >= 1)
    The hold, with a burst's reach behind it, must end within the gate's horizon (two
    days), or the gate state would read as damaged.
  Output: { opened, opened_ms, refusals, hold_end }
    opened 1  this call opened the circuit; 0 it was open already
    hold_end  the end of the hold on the calls the circuit is about, µs
  Errors: BADARG (an argument), CORRUPT (a key of the wrong type, a damaged field),
  NEWER (a format this release does not read); nothing is written. ]]
--- @include "gate_state"
--- @include "gate_hold"
--- @include "health_state"
--- @include "args"
local refusal = whole_args({ 3, 4, 5, 6, 8 }, 1) or whole_args({ 7 }, 0)
if refusal then
  return refusal
end
local reason, scope = ARGV[1], ARGV[2]
if not health_kind(reason) then
  return redis.error_reply('BADARG ARGV[1] must be 1-40 of a-z and _')
end
if scope ~= 'search' and scope ~= 'detail' and scope ~= 'any' then
  return redis.error_reply('BADARG ARGV[2] must be search, detail or any')
end
local keep, hold = tonumber(ARGV[3]), tonumber(ARGV[4])
local interval, burst, tolerance, idle_ms = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
if hold + (burst - 1) * (interval + tolerance) > HORIZON then
  return redis.error_reply('BADARG the hold (ARGV[4]), with the burst\'s reach, must end within two days')
end
local alerted_kind = redis.call('TYPE', K.alerted).ok
if alerted_kind ~= 'string' and alerted_kind ~= 'none' then
  return redis.error_reply('CORRUPT ' .. K.alerted .. ' is a ' .. alerted_kind .. ', not a string')
end
local now_us = redis_now_us()
local now = math.floor(now_us / 1000)
-- Every read, and every check, before the first write.
local h = read_health(now)
local st = read_state(now_us, interval, burst, tolerance)
local opened, opened_ms, refusals = 0, 0, 0
local held_scope = scope
if not h then
  opened, opened_ms, refusals = 1, now, 1
  redis.call('HSET', K.health, 'v', HEALTH_VERSION, 'reason', reason, 'last_reason', reason, 'scope', scope,
    'opened_ms', health_digits(now), 'last_ms', health_digits(now), 'refusals', 1)
  -- The marker is set when an alert is delivered, never before: an alert lost with its
  -- circuit silences nothing after it.
  if redis.call('GET', K.alerted) ~= reason then
    redis.call('HSET', K.health, 'alert', 0)
  end
else
  opened_ms, refusals = h.opened_ms, math.min(h.refusals + 1, HEALTH_MAX)
  -- Refusals of two scopes: only a call that reaches everything shows the key accepted.
  local widened = h.scope
  if widened ~= scope then
    widened = 'any'
  end
  -- last_ms is now even after a clock step back (a failover): a probe granted after this
  -- refusal must be able to close the circuit.
  held_scope = widened
  redis.call('HSET', K.health, 'last_reason', reason, 'scope', widened, 'last_ms', health_digits(now),
    'refusals', health_digits(refusals))
  if redis.call('EXISTS', K.alerted) == 1 then
    redis.call('PEXPIRE', K.alerted, keep)
  end
end
redis.call('PEXPIRE', K.health, keep)
if held_scope == 'any' then
  redis.call('HDEL', K.health, 'probe_until', 'probe_at')
  gate_hold(st, now_us, hold, interval, burst, tolerance)
  save_state(st, now_us, idle_ms)
  return { opened, opened_ms, refusals, st.cooldown_end }
end
-- One API refused: its calls are held in the circuit (never shortened), and the gate is
-- not. Whatever the gate's own cooldown, the later end is what holds those calls. A probe
-- in flight keeps its window too, however short the hold: this refusal may be another
-- call's, and two probes are never out at once.
local held_until = math.max(now_us + hold, tonumber(redis.call('HGET', K.health, 'probe_until') or '') or 0)
if held_until > now_us + HORIZON then
  held_until = now_us + hold
end
redis.call('HSET', K.health, 'probe_until', health_digits(held_until))
redis.call('HDEL', K.health, 'probe_at')
return { opened, opened_ms, refusals, math.max(held_until, st.cooldown_end) }
