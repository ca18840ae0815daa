--[[ queue_alerted: mark dead-letter alerts delivered, only where nothing newer is owed.
  The drainer reads the pending alerts, sends them (for up to a few seconds), then marks
  them; an entry that died again (or was revived and died) in between was re-added with a
  new time, and its alert stays owed for the next pass.
  Input:
    KEYS[1] alerts (zset id by dead-letter time, ms)
    ARGV[1], ARGV[2], ...  pairs: id, the time (score) it had when it was read
  Output: how many alerts were marked delivered ]]
local rcall = redis.call
local done = 0
for i = 1, #ARGV - 1, 2 do
  local score = rcall('ZSCORE', KEYS[1], ARGV[i])
  if score and tonumber(score) == tonumber(ARGV[i + 1]) then
    done = done + rcall('ZREM', KEYS[1], ARGV[i])
  end
end
return done
