--[[ key_alert: the key-health circuit's alert, taken once for delivery, or owed again
  after a delivery that failed.
  Keys:
    K.health  the circuit's hash (see includes/health_state.lua)
  Input:
    ARGV[1]  take, or owe
    ARGV[2]  with owe: opened_ms of the opening whose alert was taken (whole, >= 0);
             with take: ignored
  Output: take: { reason, opened_ms, last_ms, refusals, last_reason } when the alert was
          owed (and now is not), else {};
          owe: 1 owed again; 0 no such opening is open (closed, or another opening since)
  Errors: BADARG, CORRUPT, NEWER (see includes/health_state.lua); nothing is written. ]]
--- @include "health_state"
--- @include "args"
local mode = ARGV[1]
if mode ~= 'take' and mode ~= 'owe' then
  return redis.error_reply('BADARG ARGV[1] must be take or owe')
end
if mode == 'owe' then
  local refusal = whole_args({ 2 }, 0)
  if refusal then
    return refusal
  end
end
local h = read_health()
if mode == 'owe' then
  if not h or h.opened_ms ~= tonumber(ARGV[2]) then
    return 0
  end
  redis.call('HSET', K.health, 'alert', 1)
  return 1
end
if not h or not h.alert then
  return {}
end
redis.call('HDEL', K.health, 'alert')
return { h.reason, tostring(h.opened_ms), tostring(h.last_ms), tostring(h.refusals), h.last_reason }
