--[[ run_recorded: a run's record and feed lines were written to the store.
  Keys (every run script names all of a run's keys, in this order):
    K.run         hash: the run's fields and counters
    K.ids         hash: id -> state
    K.pages       set: "part|page" of every page counted
    K.parts       set: the parts (windows, probes) the run waits for
    K.changes     hash: id -> its increment-feed line, until the line is written
    K.runs        sorted set: run ids by start time (ms)
    K.unrecorded  set: completed runs whose record (or a further feed file) is owed
    K.alerts      set: runs whose discrepancy alert is owed
  Input:  ARGV[1] run id; ARGV[2] now (ms); ARGV[3] 1 when the record shows a
          discrepancy, else 0; ARGV[4] time to live of the run's keys (ms);
          ARGV[5..] pairs: id, the feed line written for it
  Output: the number of feed files written for the run so far, or -1 when no such run is
          open (it leaves the owed set)
  Errors: BADARG for bad numbers or flags; CORRUPT for a key of another type; all before
          anything is written ]]
--- @include "run_progress"
local refused = whole_args({ 2 }, 0) or whole_args({ 4 }, 1) or run_shape_refusal()
if refused then return refused end
if (ARGV[3] ~= '0' and ARGV[3] ~= '1') or (#ARGV - 4) % 2 ~= 0 then
  return redis.error_reply('BADARG run_recorded: discrepancy must be 0 or 1, lines in pairs')
end
if redis.call('EXISTS', K.run) == 0 then
  redis.call('SREM', K.unrecorded, ARGV[1])
  return -1
end
-- A line changed since it was read (the id settled again) stays for the next file.
for i = 5, #ARGV, 2 do
  if redis.call('HGET', K.changes, ARGV[i]) == ARGV[i + 1] then
    redis.call('HDEL', K.changes, ARGV[i])
  end
end
local files = tonumber(redis.call('HGET', K.run, 'feedFiles')) or 0
if #ARGV > 4 then files = redis.call('HINCRBY', K.run, 'feedFiles', 1) end
redis.call('HSET', K.run, 'recorded', ARGV[2])
for _, key in ipairs({ K.run, K.changes, K.ids, K.pages, K.parts }) do
  redis.call('PEXPIRE', key, ARGV[4])
end
if redis.call('HLEN', K.changes) == 0 then redis.call('SREM', K.unrecorded, ARGV[1]) end
if ARGV[3] == '1' and redis.call('HSETNX', K.run, 'alertOwed', ARGV[2]) == 1 then
  redis.call('SADD', K.alerts, ARGV[1])
end
return files
