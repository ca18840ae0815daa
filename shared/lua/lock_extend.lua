--[[ lock_extend: extend the single-runner lock, only by its holder.
  Input:  KEYS[1] lock   ARGV[1] token   ARGV[2] new time to live, ms
  Output: 1 extended; 0 not held by this token ]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
