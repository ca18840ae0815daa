--[[ queue_alerted: mark dead-letter alerts delivered, only where nothing newer is owed.
  The drainer reads the pending alerts, sends them (for up to a few seconds), then marks
  them; an entry that died again (or was revived and died) in between was re-added with a
  new time, and its alert stays owed for the next pass.
  Keys:
    K.alerts   zset: dead letters whose alert is not yet delivered, by dead-letter time, ms
  Input:
    ARGV     pairs, as many as there are alerts: an id, then the time (score) it had
             when it was read
  Output: how many alerts were marked delivered ]]
local marked = 0
for i = 1, #ARGV - 1, 2 do
  local score = redis.call('ZSCORE', K.alerts, ARGV[i])
  if score and tonumber(score) == tonumber(ARGV[i + 1]) then
    marked = marked + redis.call('ZREM', K.alerts, ARGV[i])
  end
end
return marked
