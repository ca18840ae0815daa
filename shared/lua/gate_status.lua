--[[ gate_status: read the gate's state with the clock of the node that holds it.
  Input:  KEYS[1] gate state hash (tat, sat, cool, epoch; see gate_acquire)
  Output: { now, tat, cool, sat }  µs on Redis' clock; 0 for an absent field
  Errors: CORRUPT when tat, sat, cool or epoch is not a number ]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local state = redis.call('HMGET', KEYS[1], 'tat', 'cool', 'epoch', 'sat')
local tat, cool, sat = tonumber(state[1]), tonumber(state[2]), tonumber(state[4])
if (state[1] and not tat) or (state[2] and not cool) or (state[3] and not tonumber(state[3]))
  or (state[4] and not sat) then
  return redis.error_reply('CORRUPT gate state in ' .. KEYS[1] .. ': tat, sat, cool and epoch must be numbers')
end
return { now, tat or 0, cool or 0, sat or 0 }
