--[[ queue_enqueue: park a job for a later retry; idempotent per job id, decided by the
  live sets (waiting, ready, leased), never by a stored field alone, so an entry whose job
  field was lost is never queued twice. New work for a dead letter revives it.
  Keys (shared/src/keys.rs says what each holds):
    K.jobs K.first K.count K.errors K.waiting K.ready K.leased K.lease K.dead K.alerts K.meta
  Input:
    ARGV[1] job id    ARGV[2] job JSON    ARGV[3] delay before the first retry, ms (>= 0)
    ARGV[4] error history JSON of a new entry (sanitized)
    ARGV[5] notes to append when a dead letter is revived (JSON array: revival, error)
    ARGV[6] most notes kept in a history
    ARGV[7] the id the previous release gave this job ('' when the same): an entry kept
            under it is this job's entry
  Output: { status, due, id }  status 1 QUEUED; 0 ALREADY_QUEUED (unchanged, but a lost
          job field is restored); 3 REVIVED from the dead letters (retryCount 0, history
          kept with the notes appended); due in ms on Redis' clock (0 when unchanged);
          id = the member name the entry lives under
  Errors: NEWER, CORRUPT, BADARG (see includes/queue_checks.lua); nothing written ]]
--- @include "queue_checks"
--- @include "queued"
--- @include "history"
--- @include "clock"
local refused = queue_refusal({ 3, 6 }, 0)
if refused then
  return refused
end
local job, delay, new_history = ARGV[2], tonumber(ARGV[3]), ARGV[4]
local revival_notes, keep = ARGV[5], tonumber(ARGV[6])
local QUEUED, ALREADY_QUEUED, REVIVED = 1, 0, 3
local now = redis_now_ms()
local id = entry_name(ARGV[1], ARGV[7])
local due = now + delay

-- Fresh attempts from now: the entry waits until due, first failure now.
local function schedule(count, history)
  redis.call('HSET', K.jobs, id, job)
  redis.call('HSET', K.count, id, count)
  redis.call('HSET', K.errors, id, history)
  redis.call('ZADD', K.first, now, id)
  redis.call('ZADD', K.waiting, due, id)
  queue_format_mark(K.meta)
end

if redis.call('ZSCORE', K.dead, id) then
  -- Everything that can fail is worked out before the first write.
  local history = history_append(redis.call('HGET', K.errors, id), revival_notes, keep)
  for _, set in ipairs({ K.dead, K.alerts, K.ready, K.leased }) do
    redis.call('ZREM', set, id)
  end
  redis.call('HDEL', K.lease, id)
  schedule(0, history)
  return { REVIVED, due, id }
end
if is_queued(id) then
  if redis.call('HEXISTS', K.jobs, id) == 0 then
    redis.call('HSET', K.jobs, id, job)
    queue_format_mark(K.meta)
  end
  return { ALREADY_QUEUED, 0, id }
end
-- Not in any set: new work (fields left behind by damage are overwritten).
redis.call('HDEL', K.lease, id)
schedule(0, new_history)
return { QUEUED, due, id }
