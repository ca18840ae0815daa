--[[ queue_enqueue: park a job for a later retry; idempotent per job id.
  Input:
    KEYS[1] jobs (hash id -> job JSON)      KEYS[2] first (zset id by first failure, ms)
    KEYS[3] count (hash id -> retryCount)   KEYS[4] errors (hash id -> error history JSON)
    KEYS[5] waiting (zset id by due, ms)    KEYS[6] dead (zset id by dead-letter time, ms)
    ARGV[1] job id    ARGV[2] job JSON    ARGV[3] delay before the first retry, ms (>= 0)
    ARGV[4] error history JSON (sanitized)
  Output: { status, due }  status 1 = queued; 0 = already queued (unchanged);
          2 = already a dead letter (unchanged; redrive it); due in ms on Redis' clock ]]
local rcall = redis.call
local t = rcall('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local id = ARGV[1]
if rcall('ZSCORE', KEYS[6], id) then
  return { 2, 0 }
end
if rcall('HEXISTS', KEYS[1], id) == 1 then
  return { 0, 0 }
end
local due = now + tonumber(ARGV[3])
rcall('HSET', KEYS[1], id, ARGV[2])
rcall('HSET', KEYS[3], id, 0)
rcall('HSET', KEYS[4], id, ARGV[4])
rcall('ZADD', KEYS[2], now, id)
rcall('ZADD', KEYS[5], due, id)
return { 1, due }
