--[[ key_probe_over: the key-health circuit's probe ended with no answer about the key (no
  reply, a 5xx or 429, a reply of no known shape, a refusal of one format only): the next
  call that could close the circuit may probe at once instead of waiting out the window.
  Keys:
    K.health  the circuit's hash (see includes/health_state.lua)
  Input:
    ARGV[1]  the probe's grant, µs on Redis' clock (whole, >= 0): probe_at as gate_acquire
             wrote it
  Output: 1 it was the probe in flight, and is over; 0 it was not (already answered, given
    back, another probe since, or no circuit)
  Errors: BADARG; nothing is written. ]]
--- @include "args"
local refusal = whole_args({ 1 }, 0)
if refusal then
  return refusal
end
if redis.call('TYPE', K.health).ok ~= 'hash' or redis.call('HGET', K.health, 'probe_at') ~= ARGV[1] then
  return 0
end
redis.call('HDEL', K.health, 'probe_until', 'probe_at')
return 1
