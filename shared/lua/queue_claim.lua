--[[ queue_claim: lease up to k due jobs, oldest first failure first. O(log N) per job moved.
  Expired leases (a drainer that died) come back first, then due jobs are promoted from
  waiting to ready (ordered by first failure), then k are leased with fresh tokens.
  An id is leased only when it is in no other set: one still leased (its lease is live, or
  not yet taken back) or dead is left where it is and its stray copy dropped, so damage
  (an id in two sets) can never hand out a second live lease.
  Keys (shared/src/keys.rs says what each holds):
    K.jobs K.first K.count K.errors K.waiting K.ready K.leased K.lease K.dead K.seq K.meta
  Input:
    ARGV[1] k (>= 1)   ARGV[2] lease length, ms   ARGV[3] most jobs moved per step
    ARGV[4] a random nonce (not empty): tokens are nonce:counter, so a counter that went
            back (a lossy failover) cannot recreate a stale holder's token
  Output: { now, reclaimed, promoted, id1, token1, job1, count1, first1, errors1, id2, ... }
    job is '' when the entry's job is missing: the caller dead-letters it as corrupt.
  An id whose first-failure score is missing is indexed at now rather than dropped.
  Errors: NEWER, CORRUPT, BADARG (see includes/queue_checks.lua); nothing written ]]
--- @include "queue_checks"
--- @include "first"
--- @include "clock"
local refused = queue_refusal({ 1, 2, 3 }, 1)
if refused then
  return refused
end
if (ARGV[4] or '') == '' then
  return redis.error_reply('BADARG ARGV[4] must be a nonce')
end
local k, lease_ms, limit, nonce = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local now = redis_now_ms()

-- Into the due set by first failure, unless it is a dead letter.
local function to_ready(id)
  if redis.call('ZSCORE', K.dead, id) then
    return false
  end
  redis.call('ZADD', K.ready, first_failure_or_now(id, now), id)
  return true
end

local reclaimed, promoted = 0, 0
local expired = redis.call('ZRANGEBYSCORE', K.leased, '-inf', now, 'LIMIT', 0, limit)
for _, id in ipairs(expired) do
  redis.call('ZREM', K.leased, id)
  redis.call('HDEL', K.lease, id)
  if to_ready(id) then
    reclaimed = reclaimed + 1
  end
end
local due = redis.call('ZRANGEBYSCORE', K.waiting, '-inf', now, 'LIMIT', 0, limit)
for _, id in ipairs(due) do
  redis.call('ZREM', K.waiting, id)
  if not redis.call('ZSCORE', K.leased, id) and to_ready(id) then
    promoted = promoted + 1
  end
end

local out = { now, reclaimed, promoted }
local taken, strays = 0, 0
while taken < k and strays < limit do
  local picked = redis.call('ZPOPMIN', K.ready, k - taken)
  if #picked == 0 then
    break
  end
  for i = 1, #picked, 2 do
    local id, first = picked[i], picked[i + 1]
    local stray = redis.call('ZSCORE', K.leased, id) or redis.call('ZSCORE', K.dead, id)
    if stray then
      strays = strays + 1
    else
      redis.call('ZREM', K.waiting, id)
      -- %d, not Lua's own number-to-text, which keeps 14 digits: tokens stay exact.
      local token = nonce .. ':' .. string.format('%d', redis.call('INCR', K.seq))
      redis.call('ZADD', K.leased, now + lease_ms, id)
      redis.call('HSET', K.lease, id, token)
      taken = taken + 1
      local n = #out
      out[n + 1] = id
      out[n + 2] = token
      out[n + 3] = redis.call('HGET', K.jobs, id) or ''
      out[n + 4] = redis.call('HGET', K.count, id) or '0'
      out[n + 5] = first
      out[n + 6] = redis.call('HGET', K.errors, id) or '[]'
    end
  end
end
if #expired + #due + taken > 0 then
  queue_format_mark(K.meta)
end
return out
