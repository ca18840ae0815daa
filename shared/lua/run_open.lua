--[[ run_open: start counting a sync run (idempotent: a repeated start changes nothing).
  Keys:
    K.run    hash: the run's fields and counters
    K.runs   sorted set: run ids by start time (ms)
  Input:  ARGV[1] run id; ARGV[2] now (ms); ARGV[3] parts: how many windows are read to
          their last page; ARGV[4] the run's description (JSON, stored as given);
          ARGV[5] time to live of the run's keys (ms); ARGV[6] month probes the run
          starts with (the daily schedule's; 0 otherwise)
  Output: 1 OPENED; 0 ALREADY_OPEN
  Errors: BADARG when a number is not a positive integer ]]
local now, parts, ttl, probes = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[5]), tonumber(ARGV[6])
if not now or not parts or parts < 1 or parts ~= math.floor(parts) or not ttl or ttl < 1
   or not probes or probes < 0 then
  return redis.error_reply('BADARG run_open: now, parts and ttl must be positive integers, probes 0 or more')
end
if redis.call('HSETNX', K.run, 'opened', ARGV[2]) == 0 then return 0 end
redis.call('HSET', K.run, 'parts', parts, 'partsDone', 0, 'seen', 0, 'meta', ARGV[4],
           'probesLeft', probes, 'unheldProbed', 0)
redis.call('PEXPIRE', K.run, ttl)
redis.call('ZADD', K.runs, now, ARGV[1])
return 1
