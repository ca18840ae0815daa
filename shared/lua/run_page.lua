--[[ run_page: count one search page of a run, once, with the state of each of its ids.
  Keys (every run script names all of a run's keys, in this order):
    K.run         hash: the run's fields and counters
    K.ids         hash: id -> state
    K.pages       set: "part|page" of every page counted
    K.parts       set: the parts (windows, probes) the run waits for
    K.changes     hash: id -> its increment-feed line, until the line is written
    K.runs        sorted set: run ids by start time (ms)
    K.unrecorded  set: completed runs whose record (or a further feed file) is owed
    K.alerts      set: runs whose discrepancy alert is owed
  Input:  ARGV[1] run id; ARGV[2] part (the window's name); ARGV[3] page (1-based);
          ARGV[4] 1 when it is the part's last page (the last that exists, or a dead one
          after which no page is read), else 0; ARGV[5] totalCnt as the page reported it;
          ARGV[6] hits without an id; ARGV[7] 1 when the page is dead (never read), else 0;
          ARGV[8] now (ms); ARGV[9] for a month probe of the daily schedule, 1 + the hits it
          found not held, else 0 (a probe's totalCnt is summed apart, in probedTotal);
          ARGV[10] hits listed that belong to other windows (the backfill's undated
          window reads the whole list; its dated hits are counted, not kept); ARGV[11] how
          many parts this page adds (a probe that found a window to read: the run waits for
          it, added before the probe counts itself done, so the run cannot complete in
          between); ARGV[12 .. 11+n] those parts' names; then pairs: id, state (sent |
          skipped)
  Output: { counted, completed, probes_left }: counted 1, or 0 for a page counted before,
          or -1 when no such run is open (its keys expired or were lost); completed 1 when
          this page completed the run; probes_left the month probes still to answer after
          this one (0 from the last: it sends the whole-list probe), or -1 for a page that
          is not a month probe
  Errors: BADARG for a bad number, flag or state; CORRUPT for a key of another type or a
          stored state that is not one; all before anything is written ]]
--- @include "run_progress"
local refused = run_whole({ 3 }, 1) or run_whole({ 5, 6, 8, 9, 10, 11 }, 0) or run_shape_refusal()
if refused then return refused end
local flag = function(i) return ARGV[i] == '0' or ARGV[i] == '1' end
if not flag(4) or not flag(7) then
  return redis.error_reply('BADARG run_page: last and dead must be 0 or 1')
end
local spawned = tonumber(ARGV[11])
local first_id = 12 + spawned
if first_id - 1 > #ARGV or (#ARGV - first_id + 1) % 2 ~= 0 then
  return redis.error_reply('BADARG run_page: the parts added and the id, state pairs do not add up')
end
local ids = {}
for i = first_id, #ARGV, 2 do
  local state = ARGV[i + 1]
  if ARGV[i] == '' or (state ~= 'sent' and state ~= 'skipped') then
    return redis.error_reply('BADARG run_page: each id needs a state, sent or skipped')
  end
  ids[#ids + 1] = ARGV[i]
end
refused = run_states_refusal(ids)
if refused then return refused end

local run_id, part, page = ARGV[1], ARGV[2], tonumber(ARGV[3])
local last, dead, now = ARGV[4] == '1', ARGV[7] == '1', ARGV[8]
local probe = tonumber(ARGV[9])
if redis.call('EXISTS', K.run) == 0 then return { -1, 0, -1 } end
if probe > 0 and (tonumber(redis.call('HGET', K.run, 'probesLeft')) or 0) < 1 then
  return redis.error_reply('BADARG run_page: a month probe for a run with no month probe left')
end
if redis.call('SADD', K.pages, part .. '|' .. page) == 0 then return { 0, 0, -1 } end
run_changed()
for i = 12, 11 + spawned do run_expect(ARGV[i]) end
local probes_left = -1
if probe > 0 then
  redis.call('HINCRBY', K.run, 'unheldProbed', probe - 1)
  probes_left = redis.call('HINCRBY', K.run, 'probesLeft', -1)
end
redis.call('HINCRBY', K.run, 'pagesDone', 1)
if dead then
  redis.call('HINCRBY', K.run, 'pagesDead', 1)
elseif probe > 0 then
  redis.call('HINCRBY', K.run, 'probedTotal', ARGV[5])
elseif page == 1 then
  redis.call('HSET', K.run, 'total:' .. part, ARGV[5])
  redis.call('HINCRBY', K.run, 'totalCnt', ARGV[5])
end
redis.call('HINCRBY', K.run, 'withoutId', ARGV[6])
redis.call('HINCRBY', K.run, 'elsewhere', ARGV[10])
redis.call('HINCRBY', K.run, 'listed:' .. part, #ids + tonumber(ARGV[6]) + tonumber(ARGV[10]))
for i = first_id, #ARGV, 2 do run_move(ARGV[i], ARGV[i + 1]) end
redis.call('HINCRBY', K.run, 'done:' .. part, 1)
if last then
  local known = tonumber(redis.call('HGET', K.run, 'last:' .. part))
  if not known or page < known then redis.call('HSET', K.run, 'last:' .. part, page) end
end
run_finish_if_read(part)
run_keep(K.ids, K.pages, K.parts)
return { 1, run_complete_if_done(run_id, now), probes_left }
