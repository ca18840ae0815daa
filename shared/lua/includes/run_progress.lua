-- A sync run's ids and its completion: shared by run_page and run_mark.
--   run hash fields: seen, n:<state> (one counter per state), parts, partsDone,
--   completed (ms, once), recorded (ms of the last record)
-- States rank sent (1) < parked (2) < settled (3: skipped added revised unchanged missing
-- dead). An id only moves up, so a repeated delivery never counts twice; a dead letter
-- may still settle another way (redriven and fetched).
local RUN_RANK = { sent = 1, parked = 2, skipped = 3, added = 3, revised = 3,
                   unchanged = 3, missing = 3, dead = 3 }

local function run_move(id, new)
  local old = redis.call('HGET', K.ids, id)
  if old == new then return 0 end
  if old then
    local from = RUN_RANK[old]
    if from == nil then
      return redis.error_reply('CORRUPT run id state ' .. tostring(old) .. ' is not a state; the run cannot be counted')
    end
    local redriven = old == 'dead' and new ~= 'skipped' and RUN_RANK[new] == 3
    if RUN_RANK[new] <= from and not redriven then return 0 end
    redis.call('HINCRBY', K.run, 'n:' .. old, -1)
  else
    redis.call('HINCRBY', K.run, 'seen', 1)
  end
  redis.call('HSET', K.ids, id, new)
  redis.call('HINCRBY', K.run, 'n:' .. new, 1)
  return 1
end

-- 1 when this call completed the run: every part read to its last page, and no id sent or
-- parked. Completion is recorded once, in `completed`, and the run goes to the set of
-- runs whose record is owed.
local function run_complete_if_done(run_id, now)
  local f = redis.call('HMGET', K.run, 'parts', 'partsDone', 'n:sent', 'n:parked', 'completed')
  if f[5] then return 0 end
  local parts = tonumber(f[1]) or 0
  if parts == 0 or (tonumber(f[2]) or 0) < parts then return 0 end
  if (tonumber(f[3]) or 0) + (tonumber(f[4]) or 0) > 0 then return 0 end
  redis.call('HSET', K.run, 'completed', now)
  redis.call('SADD', K.unrecorded, run_id)
  return 1
end

-- The run's other keys live as long as its hash.
local function run_keep(...)
  local ttl = redis.call('PTTL', K.run)
  if ttl > 0 then
    for _, key in ipairs({ ... }) do redis.call('PEXPIRE', key, ttl) end
  end
end
