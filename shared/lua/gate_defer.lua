--[[ gate_defer: start or extend the cluster-wide cooldown; never shortens one.
  Every slot handed out afterwards starts at or after the cooldown's end, spaced by the
  interval, and every start at least interval − tolerance after the one before (no burst
  right after a cooldown); slots reserved earlier that fall inside it are voided when
  their holders confirm (see gate_acquire).
  Input:
    KEYS[1]  gate state hash (tat, sat, cool, epoch; see gate_acquire)
    ARGV[1]  cooldown length from now, µs (> 0)
    ARGV[2]  interval, µs (> 0)
    ARGV[3]  burst (>= 1)
    ARGV[4]  tolerance, µs (< ARGV[2]; as gate_acquire's)
  Output: { cool, now }  the cooldown's end (possibly an earlier, longer one) and Redis' now, µs
  Errors: CORRUPT when tat, sat, cool or epoch is not a number ]]
local rcall = redis.call
local t = rcall('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local state = rcall('HMGET', KEYS[1], 'tat', 'cool', 'epoch', 'sat')
local tat, cool, sat = tonumber(state[1]), tonumber(state[2]), tonumber(state[4])
if (state[1] and not tat) or (state[2] and not cool) or (state[3] and not tonumber(state[3]))
  or (state[4] and not sat) then
  return redis.error_reply('CORRUPT gate state in ' .. KEYS[1] .. ': tat, sat, cool and epoch must be numbers')
end
tat, sat = tat or 0, sat or 0
cool = math.max(cool or 0, now + tonumber(ARGV[1]))
local extra = tonumber(ARGV[3]) - 1
tat = math.max(tat, cool + extra * tonumber(ARGV[2]))
-- Held slots that survive the cooldown (reserved behind it) start one gap apart too.
sat = math.max(sat, cool + extra * (tonumber(ARGV[2]) - tonumber(ARGV[4])))
rcall('HSET', KEYS[1], 'tat', string.format('%.0f', tat), 'sat', string.format('%.0f', sat),
  'cool', string.format('%.0f', cool))
rcall('PEXPIRE', KEYS[1], math.floor((math.max(tat, sat, cool) - now) / 1000) + 1000)
return { cool, now }
