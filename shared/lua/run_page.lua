--[[ run_page: count one search page of a run, once, with the state of each of its ids.
  Keys:
    K.run         hash: the run's fields and counters
    K.ids         hash: id -> state
    K.pages       set: "part|page" of every page counted
    K.unrecorded  set: completed runs whose record is owed
  Input:  ARGV[1] run id; ARGV[2] part (the window's name); ARGV[3] page (1-based);
          ARGV[4] 1 when it is the part's last page (the last that exists, or a dead one
          after which no page is read); ARGV[5] totalCnt as the page reported it;
          ARGV[6] hits without an id; ARGV[7] 1 when the page is dead (never read);
          ARGV[8] now (ms); ARGV[9] parts this page adds to the run (a probe that found a
          window to read adds it before it counts itself done, so the run cannot complete
          in between); ARGV[10] for a probe of the daily schedule, the hits it found not
          held, else -1; ARGV[11..] pairs: id, state (sent | skipped)
  Output: { counted, completed, probes_left }: counted 1, or 0 for a page counted before,
          or -1 when no such run is open (its keys expired or were lost); completed 1 when
          this page completed the run; probes_left the month probes still to answer after
          this one (0 from the last: it sends the whole-list probe), or -1 for a page that
          is not a month probe
  Errors: BADARG for a bad number or state; CORRUPT for an id state that is not one ]]
--- @include "run_progress"
local run_id, part = ARGV[1], ARGV[2]
local page, last, total = tonumber(ARGV[3]), ARGV[4] == '1', tonumber(ARGV[5])
local without, dead, now = tonumber(ARGV[6]), ARGV[7] == '1', ARGV[8]
local spawn, unheld = tonumber(ARGV[9]), tonumber(ARGV[10])
if not page or page < 1 or page ~= math.floor(page) or not total or total < 0
   or not without or without < 0 or not tonumber(now) or not spawn or spawn < 0
   or not unheld or (#ARGV - 10) % 2 ~= 0 then
  return redis.error_reply('BADARG run_page: page, totalCnt, hits without id, now, parts added and unheld must be numbers, ids in pairs')
end
for i = 12, #ARGV, 2 do
  if ARGV[i] ~= 'sent' and ARGV[i] ~= 'skipped' then
    return redis.error_reply('BADARG run_page: a page state must be sent or skipped')
  end
end
if redis.call('EXISTS', K.run) == 0 then return { -1, 0, -1 } end
if redis.call('SADD', K.pages, part .. '|' .. page) == 0 then return { 0, 0, -1 } end
if spawn > 0 then redis.call('HINCRBY', K.run, 'parts', spawn) end
local probes_left = -1
if unheld >= 0 then
  redis.call('HINCRBY', K.run, 'unheldProbed', unheld)
  probes_left = redis.call('HINCRBY', K.run, 'probesLeft', -1)
end
redis.call('HINCRBY', K.run, 'pagesDone', 1)
if dead then
  redis.call('HINCRBY', K.run, 'pagesDead', 1)
elseif page == 1 then
  redis.call('HINCRBY', K.run, 'totalCnt', total)
end
redis.call('HINCRBY', K.run, 'withoutId', without)
for i = 11, #ARGV, 2 do run_move(ARGV[i], ARGV[i + 1]) end
local done = redis.call('HINCRBY', K.run, 'done:' .. part, 1)
if last then redis.call('HSET', K.run, 'last:' .. part, page) end
local last_page = tonumber(redis.call('HGET', K.run, 'last:' .. part))
if last_page and done >= last_page and redis.call('HSETNX', K.run, 'finished:' .. part, 1) == 1 then
  redis.call('HINCRBY', K.run, 'partsDone', 1)
end
run_keep(K.ids, K.pages)
return { 1, run_complete_if_done(run_id, now), probes_left }
