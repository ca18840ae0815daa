--[[ include health_state: read and check the key-health circuit's hash K.health.
  Fields (as key_refused writes them):
    v            format version, 1
    reason       the kind of the refusal that opened it (KeyProblem::kind)
    last_reason  the kind of the latest refusal
    scope        what a call must reach to close it: search or detail (an API the key was
                 not granted) or any (the key itself)
    opened_ms    when it opened, ms on Redis' clock
    last_ms      when the latest refusal came
    refusals     refusals since it opened (>= 1)
    alert        present while the opening's alert is owed: when it may next be taken for
                 delivery, ms on Redis' clock (0: now; a time ahead: taken, and offered
                 again then unless its delivery is confirmed first)
    probe_until  µs on Redis' clock: no call the circuit is about starts before it (a
                 probe in flight, until its window ends; or, for a refusal of one API, the
                 hold key_refused set). Read by gate_acquire only, which checks it is a time
                 within the gate's horizon.
    probe_at     the grant of the probe in flight (gate_acquire), µs: its answer, its
                 release (gate_release) or its end without an answer (key_probe_over)
                 clears both; key_refused clears it, and key_accepted deletes the circuit.
  read_health(now_ms) → nil when there is no circuit, else { reason, last_reason, scope,
  opened_ms, last_ms, refusals, alert (nil, or when it may be taken) }. Raises CORRUPT (not
  a hash, a field that is not what it should be: numbers are whole, written in digits with
  no leading zero, below 2^53; no time more than two days ahead of now) or NEWER (a format this release does not read) before the caller writes
  anything. health_digits(n) writes a number back as digits. ]]
local HEALTH_VERSION = 1
local HEALTH_MAX = 9007199254740991
-- No time in a sound circuit lies ahead of Redis' clock by more than a clock step at a
-- failover; two days, as the gate's horizon, marks a damaged one.
local HEALTH_HORIZON_MS = 2 * 86400 * 1000
local function health_count(raw)
  if not raw or #raw > 16 or not (raw == '0' or string.match(raw, '^[1-9]%d*$')) then
    return nil
  end
  local n = tonumber(raw)
  if n > HEALTH_MAX then
    return nil
  end
  return n
end
local function health_kind(raw)
  return raw and #raw >= 1 and #raw <= 40 and string.match(raw, '^[a-z_]+$') ~= nil
end
local function health_digits(n)
  return string.format('%.0f', n)
end
local function read_health(now_ms)
  local key = K.health
  local kind = redis.call('TYPE', key).ok
  if kind == 'none' then
    return nil
  end
  if kind ~= 'hash' then
    error({ err = 'CORRUPT ' .. key .. ' is a ' .. kind .. ', not a hash' })
  end
  local f = redis.call('HMGET', key, 'v', 'reason', 'last_reason', 'scope', 'opened_ms', 'last_ms',
    'refusals', 'alert')
  local v = health_count(f[1])
  if v and v > HEALTH_VERSION then
    error({ err = 'NEWER key health ' .. key .. ': version ' .. f[1] .. ', this release understands up to '
      .. HEALTH_VERSION .. '; upgrade every instance' })
  end
  local opened, last, refusals = health_count(f[5]), health_count(f[6]), health_count(f[7])
  local alert = nil
  if f[8] then
    alert = health_count(f[8]) or -1
  end
  local scope = f[4]
  local far = now_ms + HEALTH_HORIZON_MS
  local sound = v == HEALTH_VERSION and opened and last and refusals and refusals >= 1 and opened <= far
    and last <= far and (alert == nil or (alert >= 0 and alert <= far)) and health_kind(f[2])
    and health_kind(f[3]) and (scope == 'search' or scope == 'detail' or scope == 'any')
  if not sound then
    error({ err = 'CORRUPT ' .. key .. ' is not a key-health circuit (deleting it closes the circuit; '
      .. 'the next refusal opens it again)' })
  end
  return { reason = f[2], last_reason = f[3], scope = scope, opened_ms = opened, last_ms = last,
    refusals = refusals, alert = alert }
end
