--[[ run_discard: forget a run so that its id counts again from nothing: a finished one (a
  backfill window searched again), or one that read nothing (a window split in two before
  its first page was counted). A run the store is owed anything for is kept.
  Keys (every run script names all of a run's keys, in this order):
    K.run         hash: the run's fields and counters
    K.ids         hash: id -> state
    K.pages       set: "part|page" of every page counted
    K.parts       set: the parts (windows, probes) the run waits for
    K.changes     hash: id -> its increment-feed line, until the line is written
    K.runs        sorted set: run ids by start time (ms)
    K.unrecorded  set: completed runs whose record (or a further feed file) is owed
    K.alerts      set: runs whose discrepancy alert is owed
  Input:  ARGV[1] run id; ARGV[2] 'finished' (forget a complete, recorded run) or 'unread'
          (forget a run that counted no page)
  Output: 1 when the run is gone (forgotten now, or not there); 0 when it is kept:
          'finished' keeps a run not complete or not recorded, one owed a record, a feed
          line or its alert, and one with dead ids (a dead letter redriven later settles
          in it and writes its feed line); 'unread' keeps a run that counted a page or
          holds a feed line
  Errors: BADARG for an empty run id or another mode; CORRUPT for a key of another type;
          both before anything is deleted ]]
--- @include "run_progress"
local refused = run_shape_refusal()
if refused then return refused end
if not ARGV[1] or ARGV[1] == '' then return redis.error_reply('BADARG run_discard: a run id') end
local mode = ARGV[2]
if mode ~= 'finished' and mode ~= 'unread' then
  return redis.error_reply("BADARG run_discard: mode must be 'finished' or 'unread'")
end
local run_id = ARGV[1]
if redis.call('EXISTS', K.run) == 1 then
  local keep
  if mode == 'finished' then
    keep = not redis.call('HGET', K.run, 'completed') or not redis.call('HGET', K.run, 'recorded')
      or redis.call('SISMEMBER', K.unrecorded, run_id) == 1
      or redis.call('SISMEMBER', K.alerts, run_id) == 1
      or (tonumber(redis.call('HGET', K.run, 'n:dead')) or 0) > 0
      or redis.call('HLEN', K.changes) > 0
  else
    keep = (tonumber(redis.call('HGET', K.run, 'pagesDone')) or 0) > 0
      or redis.call('SCARD', K.pages) > 0
      or redis.call('HLEN', K.changes) > 0
  end
  if keep then return 0 end
  redis.call('DEL', K.changes)
end
-- Without its hash, what is left of a run (its ids, pages and parts outlive it by their own
-- time to live) would make a new run of the same id count its pages as counted before, and
-- its place in the owed sets would have the new run recorded and alerted before it
-- completes. Feed lines of a run that is gone are not deleted here: not this script's to drop.
redis.call('DEL', K.run, K.ids, K.pages, K.parts)
redis.call('ZREM', K.runs, run_id)
redis.call('SREM', K.unrecorded, run_id)
redis.call('SREM', K.alerts, run_id)
return 1
