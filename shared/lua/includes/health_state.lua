--[[ include health_state: read and check the key-health circuit's hash K.health.
  Fields (as key_refused writes them):
    v            format version, 1
    reason       the kind of the refusal that opened it (KeyProblem::kind)
    last_reason  the kind of the latest refusal
    scope        what a call must reach to close it: search or detail (an API the key was
                 not granted) or any (the key itself)
    opened_ms    when it opened, ms on Redis' clock
    last_ms      when the latest refusal came
    refusals     refusals since it opened
    alert        present while the opening's alert is owed
  read_health() → nil when there is no circuit, else { reason, last_reason, scope,
  opened_ms, last_ms, refusals, alert (boolean) }. Raises CORRUPT (not a hash, a field that
  is not what it should be: numbers are whole, written in digits, below 2^53) or NEWER (a
  format this release does not read) before the caller writes anything. ]]
local HEALTH_VERSION = 1
local function health_count(raw)
  if not raw or #raw > 16 or not string.match(raw, '^%d+$') then
    return nil
  end
  local n = tonumber(raw)
  if n >= 9007199254740992 then
    return nil
  end
  return n
end
local function health_kind(raw)
  return raw and #raw >= 1 and #raw <= 40 and string.match(raw, '^[a-z_]+$') ~= nil
end
local function read_health()
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
  local scope = f[4]
  if v ~= HEALTH_VERSION or not opened or not last or not refusals or not health_kind(f[2])
      or not health_kind(f[3]) or not (scope == 'search' or scope == 'detail' or scope == 'any') then
    error({ err = 'CORRUPT ' .. key .. ' is not a key-health circuit' })
  end
  return { reason = f[2], last_reason = f[3], scope = scope, opened_ms = opened, last_ms = last,
    refusals = refusals, alert = f[8] ~= false }
end
