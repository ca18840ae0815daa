--[[ include shape: queue_shape_refusal() → nil when every key of K is absent or of the
  type its name says, else the CORRUPT error reply to return before anything is written.
  Redis keeps a script's writes up to a failing command, so a damaged or foreign key (a
  string where a sorted set belongs, a lease counter INCR cannot add to) met half-way
  would leave an entry in no set at all. The names are those of shared/src/keys.rs. ]]
local QUEUE_KEY_TYPES = {
  { 'jobs', 'hash' }, { 'first', 'zset' }, { 'count', 'hash' }, { 'errors', 'hash' },
  { 'waiting', 'zset' }, { 'ready', 'zset' }, { 'leased', 'zset' }, { 'lease', 'hash' },
  { 'dead', 'zset' }, { 'alerts', 'zset' }, { 'seq', 'string' }, { 'meta', 'hash' },
}
local function queue_shape_refusal()
  for _, named in ipairs(QUEUE_KEY_TYPES) do
    local key, want = K[named[1]], named[2]
    local have = key and redis.call('TYPE', key).ok or 'none'
    if have ~= 'none' and have ~= want then
      return redis.error_reply('CORRUPT ' .. key .. ' is a ' .. have .. ', not a ' .. want)
    end
    if want == 'string' and have == 'string' then
      -- What INCR can add to: a whole number without leading zeros, far from overflow.
      local v = redis.call('GET', key)
      if not (v == '0' or string.match(v, '^[1-9]%d*$')) or #v > 15 then
        return redis.error_reply('CORRUPT ' .. key .. ' is not a lease counter')
      end
    end
  end
  return nil
end
