--[[ queue_enqueue: park a job for a later retry; idempotent per job id, decided by the
  live sets (waiting, ready, leased), never by a stored field alone, so an entry whose job
  field was lost is never queued twice. New work for a dead letter revives it.
  Input:
    KEYS[1] jobs (hash id -> job JSON)      KEYS[2] first (zset id by first failure, ms)
    KEYS[3] count (hash id -> retryCount)   KEYS[4] errors (hash id -> error history JSON)
    KEYS[5] waiting (zset id by due, ms)    KEYS[6] dead (zset id by dead-letter time, ms)
    KEYS[7] ready   KEYS[8] leased   KEYS[9] lease (hash id -> token)   KEYS[10] alerts
    KEYS[11] meta (hash: v = the state's format; see includes/version.lua)
    ARGV[1] job id    ARGV[2] job JSON    ARGV[3] delay before the first retry, ms (>= 0)
    ARGV[4] error history JSON of a new entry (sanitized)
    ARGV[5] notes to append when a dead letter is revived (JSON array: revival, error)
    ARGV[6] most notes kept in a history
    ARGV[7] the id the previous release gave this job ('' when the same): an entry kept
            under it is this job's entry
  Output: { status, due, id }  status 1 = queued; 0 = already queued (unchanged, but a lost
          job field is restored); 3 = revived from the dead letters (retryCount 0, history
          kept with the notes appended); due in ms on Redis' clock (0 when unchanged);
          id = the member name the entry lives under
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
local bad = whole_args({ 3, 6 }, 0)
if bad then
  return bad
end
local t = rcall('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function member(id)
  for _, k in ipairs({ KEYS[5], KEYS[7], KEYS[8], KEYS[6] }) do
    if rcall('ZSCORE', k, id) then
      return true
    end
  end
  return false
end
local id = ARGV[1]
if ARGV[7] ~= '' and not member(id) and member(ARGV[7]) then
  id = ARGV[7]
end
local due = now + tonumber(ARGV[3])
if rcall('ZSCORE', KEYS[6], id) then
  -- Everything that can fail is worked out before the first write.
  local history = history_append(rcall('HGET', KEYS[4], id), ARGV[5], tonumber(ARGV[6]))
  rcall('ZREM', KEYS[6], id)
  rcall('ZREM', KEYS[10], id)
  for _, k in ipairs({ KEYS[7], KEYS[8] }) do
    rcall('ZREM', k, id)
  end
  rcall('HDEL', KEYS[9], id)
  rcall('HSET', KEYS[1], id, ARGV[2])
  rcall('HSET', KEYS[3], id, 0)
  rcall('HSET', KEYS[4], id, history)
  rcall('ZADD', KEYS[2], now, id)
  rcall('ZADD', KEYS[5], due, id)
  queue_format_mark(KEYS[11])
  return { 3, due, id }
end
if member(id) then
  if rcall('HEXISTS', KEYS[1], id) == 0 then
    rcall('HSET', KEYS[1], id, ARGV[2])
    queue_format_mark(KEYS[11])
  end
  return { 0, 0, id }
end
-- Not in any set: new work (fields left behind by damage are overwritten).
rcall('HDEL', KEYS[9], id)
rcall('HSET', KEYS[1], id, ARGV[2])
rcall('HSET', KEYS[3], id, 0)
rcall('HSET', KEYS[4], id, ARGV[4])
rcall('ZADD', KEYS[2], now, id)
rcall('ZADD', KEYS[5], due, id)
queue_format_mark(KEYS[11])
return { 1, due, id }
