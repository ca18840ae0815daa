--[[ key_accepted: law.go.kr answered a call: closes the key-health circuit (and with it
  any probe in flight), if the call reached what the circuit is about and was granted after
  its latest refusal.
  Keys:
    K.health  the circuit's hash (see includes/health_state.lua)
  Input:
    ARGV[1]  the call's endpoint: search or detail
    ARGV[2]  when the call was granted, ms on Redis' clock (whole, >= 0)
  Output: { closed, reason, opened_ms, refusals, alerted }
    closed 1  it was open and is closed now; 0 nothing was open, or this call shows
              nothing about it: another API than the one refused, or granted before the
              latest refusal ('', 0, 0, 0 follow when nothing was open)
    alerted 1 when the opening owed no alert, or its delivery was confirmed; 0 when it was
              still owed (closing drops it: the key works again)
  Errors: BADARG, CORRUPT, NEWER (see includes/health_state.lua); nothing is written. ]]
--- @include "clock"
--- @include "health_state"
--- @include "args"
local refusal = whole_args({ 2 }, 0)
if refusal then
  return refusal
end
local endpoint, granted = ARGV[1], tonumber(ARGV[2])
if endpoint ~= 'search' and endpoint ~= 'detail' then
  return redis.error_reply('BADARG ARGV[1] must be search or detail')
end
local h = read_health(math.floor(redis_now_us() / 1000))
if not h then
  return { 0, '', 0, 0, 0 }
end
local alerted = 1
if h.alert then
  alerted = 0
end
local shows = (h.scope == 'any' or h.scope == endpoint) and granted > h.last_ms
if not shows then
  return { 0, h.reason, h.opened_ms, h.refusals, alerted }
end
redis.call('DEL', K.health)
return { 1, h.reason, h.opened_ms, h.refusals, alerted }
