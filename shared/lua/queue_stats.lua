--[[ queue_stats: the queue's shape in one atomic read, on Redis' clock.
  Input:  KEYS[1] first  KEYS[2] waiting  KEYS[3] ready  KEYS[4] leased  KEYS[5] dead
          KEYS[6] meta (the state's format, checked, never written; see includes/version.lua)
  Output: { now, depth, due_now, in_flight, dead, oldest_first_failure (0 when empty),
            next_due (0 when nothing waits) }
    An expired lease counts as due (the next claim takes it back), not as in flight.
  Errors: NEWER (the state's format is newer than this script's), CORRUPT (v unreadable) ]]
local rcall = redis.call
--- @include "version"
local refused = queue_format_refusal(KEYS[6])
if refused then
  return refused
end
local t = rcall('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local oldest = rcall('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local next_due = rcall('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
return {
  now,
  rcall('ZCARD', KEYS[1]),
  rcall('ZCARD', KEYS[3]) + rcall('ZCOUNT', KEYS[2], '-inf', now) + rcall('ZCOUNT', KEYS[4], '-inf', now),
  rcall('ZCOUNT', KEYS[4], '(' .. now, '+inf'),
  rcall('ZCARD', KEYS[5]),
  tonumber(oldest[2] or 0),
  tonumber(next_due[2] or 0),
}
