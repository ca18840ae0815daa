--[[ run_open: start counting a sync run (idempotent: a repeated start changes nothing).
  Keys (every run script names all of a run's keys, in this order):
    K.run         hash: the run's fields and counters
    K.ids         hash: id -> state
    K.pages       set: "part|page" of every page counted
    K.parts       set: the parts (windows, probes) the run waits for
    K.changes     hash: id -> its increment-feed line, until the line is written
    K.runs        sorted set: run ids by start time (ms)
    K.unrecorded  set: completed runs whose record (or a further feed file) is owed
    K.alerts      set: runs whose discrepancy alert is owed
  Input:  ARGV[1] run id; ARGV[2] now (ms); ARGV[3] time to live of the run's keys (ms);
          ARGV[4] the run's description (JSON, stored as given); ARGV[5] month probes the
          run starts with (the daily schedule's; 0 otherwise); ARGV[6..] the parts it waits
          for, at least one
  Output: 1 OPENED; 0 ALREADY_OPEN
  Errors: BADARG for a number that is not whole, or no part; CORRUPT for a key of another
          type ]]
--- @include "run_progress"
local refused = run_whole({ 2, 5 }, 0) or run_whole({ 3 }, 1) or run_shape_refusal()
if refused then return refused end
if #ARGV < 6 then return redis.error_reply('BADARG run_open: a run waits for at least one part') end
local now, ttl = tonumber(ARGV[2]), tonumber(ARGV[3])
-- Runs older than their keys' life leave the list as new ones come.
redis.call('ZREMRANGEBYSCORE', K.runs, '-inf', '(' .. string.format('%d', now - ttl))
if redis.call('HSETNX', K.run, 'opened', ARGV[2]) == 0 then return 0 end
redis.call('HSET', K.run, 'partsDone', 0, 'seen', 0, 'meta', ARGV[4],
           'probesLeft', ARGV[5], 'unheldProbed', 0)
for i = 6, #ARGV do redis.call('SADD', K.parts, ARGV[i]) end
redis.call('PEXPIRE', K.run, ttl)
redis.call('PEXPIRE', K.parts, ttl)
redis.call('ZADD', K.runs, now, ARGV[1])
return 1
