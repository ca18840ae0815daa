--[[ lock_release: release the single-runner lock, only by its holder.
  Keys:
    K.lock   the lock: a string holding the holder's token, with a time to live
  Input:  ARGV[1] token
  Output: 1 RELEASED; 0 NOT_HELD by this token (expired, or another holder) ]]
local token = ARGV[1]
if redis.call('GET', K.lock) == token then
  return redis.call('DEL', K.lock)
end
return 0
