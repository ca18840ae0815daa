--[[ run_discard: forget a finished run, so that its id counts again from nothing (a backfill
  window searched again). A run the store is still owed anything for is kept.
  Keys (every run script names all of a run's keys, in this order):
    K.run         hash: the run's fields and counters
    K.ids         hash: id -> state
    K.pages       set: "part|page" of every page counted
    K.parts       set: the parts (windows, probes) the run waits for
    K.changes     hash: id -> its increment-feed line, until the line is written
    K.runs        sorted set: run ids by start time (ms)
    K.unrecorded  set: completed runs whose record (or a further feed file) is owed
    K.alerts      set: runs whose discrepancy alert is owed
  Input:  ARGV[1] run id
  Output: 1 when the run is gone (discarded now, or not there); 0 when it is kept: not
          complete, not recorded, owed a record or a feed line, or owed its alert
  Errors: BADARG for an empty run id; CORRUPT for a key of another type; both before
          anything is deleted ]]
--- @include "run_progress"
local refused = run_shape_refusal()
if refused then return refused end
if not ARGV[1] or ARGV[1] == '' then return redis.error_reply('BADARG run_discard: a run id') end
local run_id = ARGV[1]
if redis.call('EXISTS', K.run) == 1 then
  if not redis.call('HGET', K.run, 'completed') or not redis.call('HGET', K.run, 'recorded')
      or redis.call('SISMEMBER', K.unrecorded, run_id) == 1
      or redis.call('SISMEMBER', K.alerts, run_id) == 1
      or redis.call('HLEN', K.changes) > 0 then
    return 0
  end
  redis.call('DEL', K.changes)
end
-- Without its hash, what is left of a run (its ids, pages and parts outlive it by their own
-- time to live) would make a new run of the same id count its pages as counted before. Feed
-- lines of a run that is gone are not deleted here: they are not this script's to drop.
redis.call('DEL', K.run, K.ids, K.pages, K.parts)
redis.call('ZREM', K.runs, run_id)
return 1
