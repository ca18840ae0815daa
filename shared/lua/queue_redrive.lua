--[[ queue_redrive: put dead letters back as fresh entries, due now, retryCount 0.
  Input:
    KEYS[1] dead  KEYS[2] first  KEYS[3] waiting  KEYS[4] count  KEYS[5] jobs
    KEYS[6] errors  KEYS[7] alerts  KEYS[8] meta (the state's format; see includes/version.lua)
    ARGV[1] id, or '' for the oldest dead letters   ARGV[2] most to take (the caller
            bounds it, so one call never blocks Redis for long)
  Output: { redriven, removed }  removed: dead ids without a stored job (nothing to
          redrive), cleaned away
  Errors: NEWER (the state's format is newer than this script's), CORRUPT (v unreadable, or
          a key of the wrong type or a lease counter INCR cannot add to; see includes/shape.lua),
          BADARG (a numeric ARGV that is not a whole number in range), nothing written ]]
local rcall = redis.call
--- @include "version"
local refused = queue_format_refusal(KEYS[8])
if refused then
  return refused
end
--- @include "shape"
local damaged = queue_shape_refusal(KEYS)
if damaged then
  return damaged
end
--- @include "args"
local bad = whole_args({ 2 }, 1)
if bad then
  return bad
end
local t = rcall('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ids
if ARGV[1] ~= '' then
  ids = { ARGV[1] }
else
  ids = rcall('ZRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)
end
local n, removed = 0, 0
for _, id in ipairs(ids) do
  if rcall('ZSCORE', KEYS[1], id) then
    rcall('ZREM', KEYS[1], id)
    rcall('ZREM', KEYS[7], id)
    if rcall('HEXISTS', KEYS[5], id) == 1 then
      rcall('HSET', KEYS[4], id, 0)
      rcall('ZADD', KEYS[2], now, id)
      rcall('ZADD', KEYS[3], now, id)
      n = n + 1
    else
      rcall('HDEL', KEYS[4], id)
      rcall('HDEL', KEYS[6], id)
      removed = removed + 1
    end
  end
end
if n + removed > 0 then
  queue_format_mark(KEYS[8])
end
return { n, removed }
