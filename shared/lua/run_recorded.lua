--[[ run_recorded: a run's record and feed lines were written to the store.
  Keys:
    K.run         hash: the run's fields and counters
    K.changes     hash: id -> feed line not yet written
    K.unrecorded  set: runs whose record is owed
    K.alerts      set: runs whose discrepancy alert is owed
    K.ids         hash: id -> state (its time to live renewed with the run's)
    K.pages       set: pages counted (likewise)
  Input:  ARGV[1] run id; ARGV[2] now (ms); ARGV[3] 1 when the record shows a
          discrepancy; ARGV[4] time to live of the run's keys (ms);
          ARGV[5..] pairs: id, the feed line written for it
  Output: the number of feed files written for the run so far
  Errors: BADARG for bad numbers ]]
local now, ttl = tonumber(ARGV[2]), tonumber(ARGV[4])
if not now or not ttl or ttl < 1 or (#ARGV - 4) % 2 ~= 0 then
  return redis.error_reply('BADARG run_recorded: now and ttl must be numbers, lines in pairs')
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
for _, key in ipairs({ K.run, K.changes, K.ids, K.pages }) do redis.call('PEXPIRE', key, ttl) end
if redis.call('HLEN', K.changes) == 0 then redis.call('SREM', K.unrecorded, ARGV[1]) end
if ARGV[3] == '1' and redis.call('HSETNX', K.run, 'alertOwed', ARGV[2]) == 1 then
  redis.call('SADD', K.alerts, ARGV[1])
end
return files
