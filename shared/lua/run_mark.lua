--[[ run_mark: what became of one id of a run (parked, stored, missing, dead...).
  Keys (every run script names all of a run's keys, in this order):
    K.run         hash: the run's fields and counters
    K.ids         hash: id -> state
    K.pages       set: "part|page" of every page counted
    K.parts       set: the parts (windows, probes) the run waits for
    K.changes     hash: id -> its increment-feed line, until the line is written
    K.runs        sorted set: run ids by start time (ms)
    K.unrecorded  set: completed runs whose record (or a further feed file) is owed
    K.alerts      set: runs whose discrepancy alert is owed
  Input:  ARGV[1] run id; ARGV[2] precedent id; ARGV[3] state (parked skipped added
          revised unchanged missing dead); ARGV[4] now (ms); ARGV[5] the feed line, or ''
          when the state is no change to the mirror
  Output: { moved, record }: moved 1 when the id's state changed, -1 when no such run is
          open; record 1 when the run's record is owed now (this call completed it, or
          changed a run already recorded: its record is written again, with any new line)
  Errors: BADARG for an unknown state or a bad time; CORRUPT for a key of another type or
          a stored state that is not one; all before anything is written ]]
--- @include "run_progress"
local refused = run_whole({ 4 }, 0) or run_shape_refusal()
if refused then return refused end
local run_id, id, state, now, line = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
if RUN_RANK[state] == nil or state == 'sent' or id == '' then
  return redis.error_reply('BADARG run_mark: state must be parked, skipped, added, revised, unchanged, missing or dead, with an id')
end
refused = run_states_refusal({ id })
if refused then return refused end
if redis.call('EXISTS', K.run) == 0 then return { -1, 0 } end
local moved = run_move(id, state)
if moved == 1 and line ~= '' then redis.call('HSET', K.changes, id, line) end
run_keep(K.ids, K.changes)
if redis.call('HEXISTS', K.run, 'completed') == 1 then
  if moved == 1 then
    redis.call('SADD', K.unrecorded, run_id)
    return { 1, 1 }
  end
  return { 0, 0 }
end
return { moved, run_complete_if_done(run_id, now) }
