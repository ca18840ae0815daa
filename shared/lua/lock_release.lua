--[[ lock_release: release the single-runner lock, only by its holder.
  Input:  KEYS[1] lock   ARGV[1] token
  Output: 1 released; 0 not held by this token (expired, or another holder) ]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
