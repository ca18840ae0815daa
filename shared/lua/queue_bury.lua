--[[ queue_bury: record a job that failed permanently straight as a dead letter (a failure
  seen outside the queue, e.g. on its first SQS delivery). A live entry of the same job
  leaves the live sets, keeping its history, with its retryCount raised by one (this
  failure); a drainer holding its lease then finds the lease gone. A job already dead gets
  the note appended and is alerted again: never silent.
  Keys (shared/src/keys.rs says what each holds):
    K.jobs K.first K.count K.errors K.waiting K.ready K.leased K.lease K.dead K.alerts K.meta
  Input:
    ARGV[1] id   ARGV[2] job JSON   ARGV[3] notes to append (JSON array, sanitized)
    ARGV[4] most notes kept in a history
    ARGV[5] the id the previous release gave this job ('' when the same)
  Output: { status, id }  status 1 BURIED; 0 ALREADY_DEAD (note appended, alert owed again)
  Errors: NEWER, CORRUPT, BADARG (see includes/queue_checks.lua); nothing written ]]
--- @include "queue_checks"
--- @include "queued"
--- @include "history"
--- @include "clock"
local refused = queue_refusal({ 4 }, 0)
if refused then
  return refused
end
local job, notes, keep = ARGV[2], ARGV[3], tonumber(ARGV[4])
local BURIED, ALREADY_DEAD = 1, 0
local now = redis_now_ms()
local id = entry_name(ARGV[1], ARGV[5])
local history = history_append(redis.call('HGET', K.errors, id), notes, keep)
redis.call('HSET', K.errors, id, history)
redis.call('ZADD', K.alerts, now, id)
queue_format_mark(K.meta)
if redis.call('ZSCORE', K.dead, id) then
  if redis.call('HEXISTS', K.jobs, id) == 0 then
    redis.call('HSET', K.jobs, id, job)
  end
  return { ALREADY_DEAD, id }
end
redis.call('HSET', K.jobs, id, job)
redis.call('HSET', K.count, id, (tonumber(redis.call('HGET', K.count, id)) or 0) + 1)
for _, set in ipairs({ K.first, K.waiting, K.ready, K.leased }) do
  redis.call('ZREM', set, id)
end
redis.call('HDEL', K.lease, id)
redis.call('ZADD', K.dead, now, id)
return { BURIED, id }
