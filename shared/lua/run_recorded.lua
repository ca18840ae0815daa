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
          discrepancy, else 0; ARGV[4] time to live of the run's keys (ms); ARGV[5] the
          run's version the record was written from; ARGV[6] the feed file written, or ''
          for none; ARGV[7..] pairs: id, the feed line written in it
  Output: the number of feed files written for the run so far, or -1 when no such run is
          open (it leaves the owed set); the run stays owed when its version moved since
          the record was read (a mark or page came in between), or a line is left
  Errors: BADARG for bad numbers or flags; CORRUPT for a key of another type; all before
          anything is written ]]
--- @include "run_progress"
local refused = run_whole({ 2, 5 }, 0) or run_whole({ 4 }, 1) or run_shape_refusal()
if refused then return refused end
if (ARGV[3] ~= '0' and ARGV[3] ~= '1') or #ARGV < 6 or (#ARGV - 6) % 2 ~= 0 then
  return redis.error_reply('BADARG run_recorded: discrepancy must be 0 or 1, lines in pairs')
end
if redis.call('EXISTS', K.run) == 0 then
  redis.call('SREM', K.unrecorded, ARGV[1])
  return -1
end
-- A line changed since it was read (the id settled again) stays for the next file.
for i = 7, #ARGV, 2 do
  if redis.call('HGET', K.changes, ARGV[i]) == ARGV[i + 1] then
    redis.call('HDEL', K.changes, ARGV[i])
  end
end
local feed = cjson.decode(redis.call('HGET', K.run, 'feed') or '[]')
if ARGV[6] ~= '' then
  feed[#feed + 1] = ARGV[6]
  redis.call('HSET', K.run, 'feed', cjson.encode(feed))
end
local files = #feed
redis.call('HSET', K.run, 'recorded', ARGV[2])
for _, key in ipairs({ K.run, K.changes, K.ids, K.pages, K.parts }) do
  redis.call('PEXPIRE', key, ARGV[4])
end
local version = redis.call('HGET', K.run, 'version') or '0'
if redis.call('HLEN', K.changes) == 0 and version == ARGV[5] then
  redis.call('SREM', K.unrecorded, ARGV[1])
end
if ARGV[3] == '1' and redis.call('HSETNX', K.run, 'alertOwed', ARGV[2]) == 1 then
  redis.call('SADD', K.alerts, ARGV[1])
end
return files
