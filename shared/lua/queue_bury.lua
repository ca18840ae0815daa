--[[ queue_bury: record a job that failed permanently straight as a dead letter (a failure
  seen outside the queue, e.g. on its first SQS delivery). A live entry of the same job
  leaves the live sets, keeping its history; a drainer holding its lease then finds the
  lease gone. A job already dead gets the note appended and is alerted again: never silent.
  Input:
    KEYS[1] jobs  KEYS[2] count  KEYS[3] errors  KEYS[4] first  KEYS[5] waiting
    KEYS[6] ready  KEYS[7] leased  KEYS[8] lease  KEYS[9] dead  KEYS[10] alerts
    KEYS[11] meta (the state's format; see includes/version.lua)
    ARGV[1] id   ARGV[2] job JSON   ARGV[3] notes to append (JSON array, sanitized)
    ARGV[4] most notes kept in a history
    ARGV[5] the id the previous release gave this job ('' when the same)
  Output: { status, id }  status 1 buried; 0 already a dead letter (note appended,
          alert owed again)
  Errors: NEWER (the state's format is newer than this script's), CORRUPT (v unreadable, or
          a key of the wrong type or a lease counter INCR cannot add to; see includes/shape.lua),
          BADARG (a numeric ARGV that is not a whole number in range), nothing written ]]
local rcall = redis.call
--- @include "history"
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
local bad = whole_args({ 4 }, 0)
if bad then
  return bad
end
local t = rcall('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function member(id)
  for i = 5, 7 do
    if rcall('ZSCORE', KEYS[i], id) then
      return true
    end
  end
  return rcall('ZSCORE', KEYS[9], id) ~= false
end
local id = ARGV[1]
if ARGV[5] ~= '' and not member(id) and member(ARGV[5]) then
  id = ARGV[5]
end
local history = history_append(rcall('HGET', KEYS[3], id), ARGV[3], tonumber(ARGV[4]))
rcall('HSET', KEYS[3], id, history)
rcall('ZADD', KEYS[10], now, id)
queue_format_mark(KEYS[11])
if rcall('ZSCORE', KEYS[9], id) then
  if rcall('HEXISTS', KEYS[1], id) == 0 then
    rcall('HSET', KEYS[1], id, ARGV[2])
  end
  return { 0, id }
end
rcall('HSET', KEYS[1], id, ARGV[2])
rcall('HSET', KEYS[2], id, (tonumber(rcall('HGET', KEYS[2], id)) or 0) + 1)
for i = 4, 7 do
  rcall('ZREM', KEYS[i], id)
end
rcall('HDEL', KEYS[8], id)
rcall('ZADD', KEYS[9], now, id)
return { 1, id }
