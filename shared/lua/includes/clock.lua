--[[ include clock: Redis' own clock, the one every instance shares.
  redis_now_us() → µs since the epoch (the gate's unit); redis_now_ms() → whole ms (the
  queue's unit). Nothing else reads TIME. ]]
local function redis_now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function redis_now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
