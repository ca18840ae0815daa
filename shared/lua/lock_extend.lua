--[[ lock_extend: extend the single-runner lock, only by its holder.
  Keys:
    K.lock   the lock: a string holding the holder's token, with a time to live
  Input:  ARGV[1] token   ARGV[2] new time to live, ms
  Output: 1 EXTENDED; 0 NOT_HELD by this token ]]
local token, ttl_ms = ARGV[1], ARGV[2]
if redis.call('GET', K.lock) == token then
  return redis.call('PEXPIRE', K.lock, ttl_ms)
end
return 0
