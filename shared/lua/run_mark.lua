--[[ run_mark: what became of one id of a run (parked, stored, missing, dead...).
  Keys:
    K.run         hash: the run's fields and counters
    K.ids         hash: id -> state
    K.changes     hash: id -> its increment-feed line, until the line is written
    K.unrecorded  set: runs whose record (or a feed file) is owed
  Input:  ARGV[1] run id; ARGV[2] precedent id; ARGV[3] state (parked added revised
          unchanged missing dead skipped); ARGV[4] now (ms); ARGV[5] the feed line, or ''
          when the state is no change to the mirror
  Output: { moved, record }: moved 1 when the id's state changed; record 1 when the run's
          record is owed now (this call completed it, or added a feed line to a run
          already completed)
  Errors: BADARG for an unknown state; CORRUPT for a stored state that is not one ]]
--- @include "run_progress"
local run_id, id, state, now, line = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
if RUN_RANK[state] == nil or state == 'sent' or not tonumber(now) or id == '' then
  return redis.error_reply('BADARG run_mark: state must be parked, skipped, added, revised, unchanged, missing or dead, with an id and a time')
end
if redis.call('EXISTS', K.run) == 0 then return { -1, 0 } end
local moved = run_move(id, state)
if moved == 1 and line ~= '' then redis.call('HSET', K.changes, id, line) end
run_keep(K.ids, K.changes)
if redis.call('HEXISTS', K.run, 'completed') == 1 then
  if moved == 1 and line ~= '' then
    redis.call('SADD', K.unrecorded, run_id)
    return { 1, 1 }
  end
  return { moved, 0 }
end
return { moved, run_complete_if_done(run_id, now) }
