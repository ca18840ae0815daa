--[[ queue_settle: end a lease — ack (done), retry later, dead-letter, release unworked (due
  again at once), or release until a given time (not worked: the rate gate had no room).
  Only the holder of the current lease token may settle; a drainer whose lease expired
  and was re-leased to another gets 0 and must drop the job.
  Keys (shared/src/keys.rs says what each holds):
    K.jobs K.first K.count K.errors K.waiting K.ready K.leased K.lease K.dead K.alerts K.meta
  Input:
    ARGV[1] id   ARGV[2] token   ARGV[3] action: ack | retry | dead | release | later
    ARGV[4] retryCount after this outcome (retry, dead)
    ARGV[5] error history JSON (retry, dead)   ARGV[6] delay until due, ms (retry, later)
  release and later keep the retryCount and the history as they are.
  Output: 1 SETTLED; 0 LEASE_LOST: the token is not the current lease (nothing changed)
  Errors: NEWER, CORRUPT, BADARG (see includes/queue_checks.lua), BADACTION; nothing written ]]
--- @include "queue_checks"
--- @include "first"
--- @include "clock"
local refused = queue_refusal({ 4, 6 }, 0)
if refused then
  return refused
end
local id, token, action = ARGV[1], ARGV[2], ARGV[3]
local count, history, delay = ARGV[4], ARGV[5], tonumber(ARGV[6])
local SETTLED, LEASE_LOST = 1, 0
local actions = { ack = true, retry = true, dead = true, release = true, later = true }
if not actions[action] then
  return redis.error_reply('BADACTION unknown settle action')
end
if redis.call('HGET', K.lease, id) ~= token then
  return LEASE_LOST
end
queue_format_mark(K.meta)
local now = redis_now_ms()
redis.call('ZREM', K.leased, id)
redis.call('HDEL', K.lease, id)
-- A stray copy in another live set (damage) goes too: the outcome says where it belongs.
redis.call('ZREM', K.waiting, id)
redis.call('ZREM', K.ready, id)
if action == 'ack' then
  redis.call('HDEL', K.jobs, id)
  redis.call('HDEL', K.count, id)
  redis.call('HDEL', K.errors, id)
  redis.call('ZREM', K.first, id)
elseif action == 'retry' then
  redis.call('HSET', K.count, id, count)
  redis.call('HSET', K.errors, id, history)
  redis.call('ZADD', K.waiting, now + delay, id)
elseif action == 'dead' then
  redis.call('HSET', K.count, id, count)
  redis.call('HSET', K.errors, id, history)
  redis.call('ZREM', K.first, id)
  redis.call('ZADD', K.dead, now, id)
  redis.call('ZADD', K.alerts, now, id)
elseif action == 'release' then
  redis.call('ZADD', K.ready, first_failure_or_now(id, now), id)
elseif action == 'later' then
  redis.call('ZADD', K.waiting, now + delay, id)
end
return SETTLED
