--[[ queue_bury: record a job that failed permanently straight as a dead letter (a failure
  seen outside the queue, e.g. on its first SQS delivery). Idempotent: a job already dead
  is left as it is. A live entry of the same job leaves the live sets; a drainer holding
  its lease then finds the lease gone.
  Input:
    KEYS[1] jobs  KEYS[2] count  KEYS[3] errors  KEYS[4] first  KEYS[5] waiting
    KEYS[6] ready  KEYS[7] leased  KEYS[8] lease  KEYS[9] dead  KEYS[10] alerts
    ARGV[1] id   ARGV[2] job JSON   ARGV[3] error history JSON (sanitized)
  Output: 1 buried; 0 already a dead letter ]]
local rcall = redis.call
local id = ARGV[1]
if rcall('ZSCORE', KEYS[9], id) then
  return 0
end
local t = rcall('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
rcall('HSET', KEYS[1], id, ARGV[2])
rcall('HSET', KEYS[2], id, (tonumber(rcall('HGET', KEYS[2], id)) or 0) + 1)
rcall('HSET', KEYS[3], id, ARGV[3])
for i = 4, 7 do
  rcall('ZREM', KEYS[i], id)
end
rcall('HDEL', KEYS[8], id)
rcall('ZADD', KEYS[9], now, id)
rcall('ZADD', KEYS[10], now, id)
return 1
