--[[ queue_redrive: put dead letters back as fresh entries, due now, retryCount 0.
  Keys (shared/src/keys.rs says what each holds):
    K.jobs K.first K.count K.errors K.waiting K.dead K.alerts K.meta
  Input:
    ARGV[1] id, or '' for the oldest dead letters   ARGV[2] most to take (the caller
            bounds it, so one call never blocks Redis for long)
  Output: { redriven, removed }  removed: dead ids without a stored job (nothing to
          redrive), cleaned away
  Errors: NEWER, CORRUPT, BADARG (see includes/queue_checks.lua); nothing written ]]
--- @include "queue_checks"
--- @include "clock"
local refused = queue_refusal({ 2 }, 1)
if refused then
  return refused
end
local one, most = ARGV[1], tonumber(ARGV[2])
local now = redis_now_ms()
local ids
if one ~= '' then
  ids = { one }
else
  ids = redis.call('ZRANGE', K.dead, 0, most - 1)
end
local redriven, removed = 0, 0
for _, id in ipairs(ids) do
  if redis.call('ZSCORE', K.dead, id) then
    redis.call('ZREM', K.dead, id)
    redis.call('ZREM', K.alerts, id)
    if redis.call('HEXISTS', K.jobs, id) == 1 then
      redis.call('HSET', K.count, id, 0)
      redis.call('ZADD', K.first, now, id)
      redis.call('ZADD', K.waiting, now, id)
      redriven = redriven + 1
    else
      redis.call('HDEL', K.count, id)
      redis.call('HDEL', K.errors, id)
      removed = removed + 1
    end
  end
end
if redriven + removed > 0 then
  queue_format_mark(K.meta)
end
return { redriven, removed }
