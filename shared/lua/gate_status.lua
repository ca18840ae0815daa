--[[ gate_status: read the gate's state with the clock of the node that holds it.
  Input:  KEYS[1] gate state hash (tat, cool)
  Output: { now, tat, cool }  µs on Redis' clock; 0 for an absent field ]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local state = redis.call('HMGET', KEYS[1], 'tat', 'cool')
return { now, tonumber(state[1]) or 0, tonumber(state[2]) or 0 }
