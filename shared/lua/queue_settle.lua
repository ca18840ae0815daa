--[[ queue_settle: end a lease — ack (done), retry later, dead-letter, release unworked (due
  again at once), or release until a given time (not worked: the rate gate had no room).
  Only the holder of the current lease token may settle; a drainer whose lease expired
  and was re-leased to another gets 0 and must drop the job.
  Input:
    KEYS[1] leased  KEYS[2] lease  KEYS[3] jobs  KEYS[4] count  KEYS[5] errors
    KEYS[6] first   KEYS[7] waiting  KEYS[8] ready  KEYS[9] dead
    KEYS[10] alerts (zset: dead letters whose alert is not yet delivered)
    KEYS[11] meta (the state's format; see includes/version.lua)
    ARGV[1] id   ARGV[2] token   ARGV[3] action: ack | retry | dead | release | later
    ARGV[4] retryCount after this outcome (retry, dead)
    ARGV[5] error history JSON (retry, dead)   ARGV[6] delay until due, ms (retry, later)
  release and later keep the retryCount and the history as they are.
  Output: 1 settled; 0 the token is not the current lease (nothing changed)
  Errors: NEWER (the state's format is newer than this script's), CORRUPT (v unreadable, or
          a key of the wrong type or a lease counter INCR cannot add to; see includes/shape.lua),
          BADARG (a numeric ARGV that is not a whole number in range), BADACTION; nothing written ]]
local rcall = redis.call
--- @include "version"
local refused = queue_format_refusal(KEYS[11])
if refused then
  return refused
end
--- @include "shape"
local damaged = queue_shape_refusal(KEYS)
if damaged then
  return damaged
end
--- @include "args"
local bad = whole_args({ 4, 6 }, 0)
if bad then
  return bad
end
local id, action = ARGV[1], ARGV[3]
local actions = { ack = true, retry = true, dead = true, release = true, later = true }
if not actions[action] then
  return redis.error_reply('BADACTION unknown settle action')
end
if rcall('HGET', KEYS[2], id) ~= ARGV[2] then
  return 0
end
queue_format_mark(KEYS[11])
local t = rcall('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
rcall('ZREM', KEYS[1], id)
rcall('HDEL', KEYS[2], id)
-- A stray copy in another live set (damage) goes too: the outcome says where it belongs.
rcall('ZREM', KEYS[7], id)
rcall('ZREM', KEYS[8], id)
if action == 'ack' then
  rcall('HDEL', KEYS[3], id)
  rcall('HDEL', KEYS[4], id)
  rcall('HDEL', KEYS[5], id)
  rcall('ZREM', KEYS[6], id)
elseif action == 'retry' then
  rcall('HSET', KEYS[4], id, ARGV[4])
  rcall('HSET', KEYS[5], id, ARGV[5])
  rcall('ZADD', KEYS[7], now + tonumber(ARGV[6]), id)
elseif action == 'dead' then
  rcall('HSET', KEYS[4], id, ARGV[4])
  rcall('HSET', KEYS[5], id, ARGV[5])
  rcall('ZREM', KEYS[6], id)
  rcall('ZADD', KEYS[9], now, id)
  rcall('ZADD', KEYS[10], now, id)
elseif action == 'release' then
  local first = rcall('ZSCORE', KEYS[6], id)
  if not first then
    first = now
    rcall('ZADD', KEYS[6], first, id)
  end
  rcall('ZADD', KEYS[8], first, id)
elseif action == 'later' then
  rcall('ZADD', KEYS[7], now + tonumber(ARGV[6]), id)
end
return 1
