--[[ include run_progress: a sync run's ids, parts and completion, for run_page and run_mark.
  The run hash holds: opened, meta, seen, n:<state> (one counter per state), partsDone,
  probesLeft, unheldProbed, pagesDone, pagesDead, withoutId, elsewhere, totalCnt, and per part p:
  total:<p> (totalCnt of its first page), listed:<p> (ids, hits without id and hits of
  other windows on its pages), done:<p> (pages counted), last:<p> (its last page), finished:<p>; then
  completed (ms, once), recorded (ms), feedFiles, alertOwed.
  K.parts lists the parts the run waits for: the windows it was opened with, and those a
  probe added. A part is finished when every page from 1 to its last was counted.
  States rank sent (1) < parked (2) < skipped (3) < settled by a fetch (4: added revised
  unchanged missing dead). An id only moves up, so a repeated delivery never counts twice;
  a skip seen by another page never hides the fetch's outcome (and its feed line) that
  comes after; a dead letter may still settle by a fetch (redriven). ]]
-- nil when every ARGV[i] listed is a whole number written as Redis writes one (digits, no
-- sign, no leading zero, at most 15 of them) and at least min, else the BADARG reply. Lua
-- reads 1e2, 0x10, " 7" and 7.0 as numbers where HINCRBY would refuse them half-way.
local function run_whole(indices, min)
  for _, i in ipairs(indices) do
    local v = ARGV[i]
    if not v or not (v == '0' or string.match(v, '^[1-9]%d*$')) or #v > 15 or tonumber(v) < min then
      return redis.error_reply('BADARG ARGV[' .. i .. '] must be a whole number from ' .. min .. ', in digits')
    end
  end
  return nil
end

local RUN_RANK = { sent = 1, parked = 2, skipped = 3, added = 4, revised = 4,
                   unchanged = 4, missing = 4, dead = 4 }

local RUN_KEY_TYPES = {
  { 'run', 'hash' }, { 'ids', 'hash' }, { 'pages', 'set' }, { 'parts', 'set' },
  { 'changes', 'hash' }, { 'runs', 'zset' }, { 'unrecorded', 'set' }, { 'alerts', 'set' },
}

-- nil when every key this script has is absent or of its type, else the CORRUPT reply.
local function run_shape_refusal()
  for _, named in ipairs(RUN_KEY_TYPES) do
    local key, want = K[named[1]], named[2]
    if key then
      local have = redis.call('TYPE', key).ok
      if have ~= 'none' and have ~= want then
        return redis.error_reply('CORRUPT ' .. key .. ' is a ' .. have .. ', not a ' .. want .. '; the run cannot be counted')
      end
    end
  end
  return nil
end

-- nil when every stored state of these ids is one, else the CORRUPT reply (checked before
-- anything is written).
local function run_states_refusal(ids)
  for _, id in ipairs(ids) do
    local old = redis.call('HGET', K.ids, id)
    if old and RUN_RANK[old] == nil then
      return redis.error_reply('CORRUPT ' .. K.ids .. ' holds a state that is not one; the run cannot be counted')
    end
  end
  return nil
end

local function run_move(id, new)
  local old = redis.call('HGET', K.ids, id)
  if old == new then return 0 end
  if old then
    local redriven = old == 'dead' and RUN_RANK[new] == 4
    if RUN_RANK[new] <= RUN_RANK[old] and not redriven then return 0 end
    redis.call('HINCRBY', K.run, 'n:' .. old, -1)
  else
    redis.call('HINCRBY', K.run, 'seen', 1)
  end
  redis.call('HSET', K.ids, id, new)
  redis.call('HINCRBY', K.run, 'n:' .. new, 1)
  redis.call('HINCRBY', K.run, 'version', 1)
  return 1
end

-- Part p counts as done once it is finished and the run waits for it.
local function run_part_settled(p)
  if redis.call('HGET', K.run, 'finished:' .. p) and redis.call('SISMEMBER', K.parts, p) == 1 then
    redis.call('HINCRBY', K.run, 'partsDone', 1)
  end
end

-- Marks part p finished when pages 1..last are all counted (once).
local function run_finish_if_read(p)
  local last = tonumber(redis.call('HGET', K.run, 'last:' .. p))
  local done = tonumber(redis.call('HGET', K.run, 'done:' .. p)) or 0
  if not last or done < last or redis.call('HEXISTS', K.run, 'finished:' .. p) == 1 then return end
  for page = 1, last do
    if redis.call('SISMEMBER', K.pages, p .. '|' .. page) == 0 then return end
  end
  redis.call('HSET', K.run, 'finished:' .. p, 1)
  run_part_settled(p)
end

-- Adds part p to those the run waits for (a probe found a window to read).
local function run_expect(p)
  if redis.call('SADD', K.parts, p) == 1 then run_part_settled(p) end
end

-- Every change to what a record would say bumps the run's version; a record written from an
-- older version leaves the run owed.
local function run_changed()
  redis.call('HINCRBY', K.run, 'version', 1)
end

-- 1 when this call completed the run: every part it waits for read to its last page, and
-- no id sent or parked. Completion is recorded once, in `completed`, and the run goes to
-- the set of runs whose record is owed.
local function run_complete_if_done(run_id, now)
  local f = redis.call('HMGET', K.run, 'partsDone', 'n:sent', 'n:parked', 'completed')
  if f[4] then return 0 end
  local parts = redis.call('SCARD', K.parts)
  if parts == 0 or (tonumber(f[1]) or 0) < parts then return 0 end
  if (tonumber(f[2]) or 0) + (tonumber(f[3]) or 0) > 0 then return 0 end
  redis.call('HSET', K.run, 'completed', now)
  run_changed()
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
