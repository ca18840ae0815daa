--[[ queue_stats: the queue's shape in one atomic read, on Redis' clock.
  Keys (shared/src/keys.rs says what each holds):
    K.first K.waiting K.ready K.leased K.dead
    K.meta   the state's format, checked, never written (see includes/version.lua)
  Output: { now, depth, due_now, in_flight, dead, oldest_first_failure (0 when empty),
            next_due (0 when nothing waits) }
    An expired lease counts as due (the next claim takes it back), not as in flight.
  Errors: NEWER (the state's format is newer than this script's), CORRUPT (v unreadable) ]]
--- @include "version"
--- @include "clock"
local refused = queue_format_refusal(K.meta)
if refused then
  return refused
end
local now = redis_now_ms()
local oldest = redis.call('ZRANGE', K.first, 0, 0, 'WITHSCORES')
local next_due = redis.call('ZRANGE', K.waiting, 0, 0, 'WITHSCORES')
local due_now = redis.call('ZCARD', K.ready) + redis.call('ZCOUNT', K.waiting, '-inf', now)
  + redis.call('ZCOUNT', K.leased, '-inf', now)
return {
  now,
  redis.call('ZCARD', K.first),
  due_now,
  redis.call('ZCOUNT', K.leased, '(' .. now, '+inf'),
  redis.call('ZCARD', K.dead),
  tonumber(oldest[2] or 0),
  tonumber(next_due[2] or 0),
}
