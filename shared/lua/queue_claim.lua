--[[ queue_claim: lease up to k due jobs, oldest first failure first. O(log N) per job moved.
  Expired leases (a drainer that died) come back first, then due jobs are promoted from
  waiting to ready (ordered by first failure), then k are leased with fresh tokens.
  An id is leased only when it is in no other set: one still leased (its lease is live, or
  not yet taken back) or dead is left where it is and its stray copy dropped, so damage
  (an id in two sets) can never hand out a second live lease.
  Input:
    KEYS[1] waiting (zset by due)   KEYS[2] ready (zset by first failure)
    KEYS[3] leased (zset by lease deadline)   KEYS[4] first (zset by first failure)
    KEYS[5] lease (hash id -> token)   KEYS[6] jobs   KEYS[7] count   KEYS[8] errors
    KEYS[9] seq (string counter for lease tokens)   KEYS[10] dead
    KEYS[11] meta (the state's format; see includes/version.lua)
    ARGV[1] k (>= 1)   ARGV[2] lease length, ms   ARGV[3] most jobs moved per step
    ARGV[4] a random nonce: tokens are nonce:counter, so a counter that went back (a lossy
            failover) cannot recreate a stale holder's token
  Output: { now, reclaimed, promoted, id1, token1, job1, count1, first1, errors1, id2, ... }
    job is '' when the entry's job is missing: the caller dead-letters it as corrupt.
  An id whose first-failure score is missing is indexed at now rather than dropped.
  Errors: NEWER (the state's format is newer than this script's), CORRUPT (v unreadable, or
          a key of the wrong type or a lease counter INCR cannot add to; see includes/shape.lua),
          BADARG (a numeric ARGV that is not a whole number in range), nothing written ]]
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
local bad = whole_args({ 1, 2, 3 }, 1)
if bad then
  return bad
end
local t = rcall('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local k = tonumber(ARGV[1])
local limit = tonumber(ARGV[3])

local function to_ready(id)
  if rcall('ZSCORE', KEYS[10], id) then
    return false
  end
  local first = rcall('ZSCORE', KEYS[4], id)
  if not first then
    first = now
    rcall('ZADD', KEYS[4], first, id)
  end
  rcall('ZADD', KEYS[2], first, id)
  return true
end

local reclaimed, promoted = 0, 0
local expired = rcall('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, limit)
for _, id in ipairs(expired) do
  rcall('ZREM', KEYS[3], id)
  rcall('HDEL', KEYS[5], id)
  if to_ready(id) then
    reclaimed = reclaimed + 1
  end
end
local due = rcall('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, limit)
for _, id in ipairs(due) do
  rcall('ZREM', KEYS[1], id)
  if not rcall('ZSCORE', KEYS[3], id) and to_ready(id) then
    promoted = promoted + 1
  end
end

local out = { now, reclaimed, promoted }
local taken, strays = 0, 0
while taken < k and strays < limit do
  local picked = rcall('ZPOPMIN', KEYS[2], k - taken)
  if #picked == 0 then
    break
  end
  for i = 1, #picked, 2 do
    local id, first = picked[i], picked[i + 1]
    if rcall('ZSCORE', KEYS[3], id) or rcall('ZSCORE', KEYS[10], id) then
      strays = strays + 1
    else
      rcall('ZREM', KEYS[1], id)
      local token = ARGV[4] .. ':' .. rcall('INCR', KEYS[9])
      rcall('ZADD', KEYS[3], now + tonumber(ARGV[2]), id)
      rcall('HSET', KEYS[5], id, token)
      taken = taken + 1
      local n = #out
      out[n + 1] = id
      out[n + 2] = token
      out[n + 3] = rcall('HGET', KEYS[6], id) or ''
      out[n + 4] = rcall('HGET', KEYS[7], id) or '0'
      out[n + 5] = first
      out[n + 6] = rcall('HGET', KEYS[8], id) or '[]'
    end
  end
end
if #expired + #due + taken > 0 then
  queue_format_mark(KEYS[11])
end
return out
