--[[ gate_acquire: reserve a start slot on the rate gate, or confirm one reserved earlier.
  GCRA with reservation: a caller that must wait is handed its own future slot and
  sleeps once, instead of polling. Decided on Redis' clock (TIME), all times in µs.
  Input:
    KEYS[1]  gate state hash; fields tat (theoretical arrival time) and cool (cooldown end)
    ARGV[1]  interval, µs (> 0)
    ARGV[2]  burst (>= 1)
    ARGV[3]  longest wait the caller accepts, µs (>= 0)
    ARGV[4]  slot reserved earlier and slept until, µs; 0 for a fresh request
    ARGV[5]  tolerance, µs: how late a holder may confirm and still have its slot
  Output: { code, slot, now, cool }
    code 0  go: slot is granted (slot <= now)
    code 1  wait: sleep (slot - now) µs, then call again with ARGV[4] = slot
    code 2  refused: the wait would exceed ARGV[3]; nothing was reserved
  Errors: CORRUPT when tat or cool is not a number (nothing is granted)
  A held slot is lost, and replaced by a fresh reservation at the back of the queue, when
  a cooldown set after its reservation ends later than it, or when its holder confirms
  more than ARGV[5] after it (a late start would crowd the next holder's call). ]]
local rcall = redis.call
local t = rcall('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local max_wait = tonumber(ARGV[3])
local held = tonumber(ARGV[4])
local tolerance = tonumber(ARGV[5])
local state = rcall('HMGET', KEYS[1], 'tat', 'cool')
local tat, cool = tonumber(state[1]), tonumber(state[2])
if (state[1] and not tat) or (state[2] and not cool) then
  return redis.error_reply('CORRUPT gate state in ' .. KEYS[1] .. ': tat and cool must be numbers')
end
tat, cool = tat or 0, cool or 0

if held > 0 and held >= cool then
  if held > now then
    return { 1, held, now, cool }
  end
  if now - held <= tolerance then
    return { 0, held, now, cool }
  end
end

local tau = (burst - 1) * interval
local slot = math.max(now, tat - tau, cool)
if slot - now > max_wait then
  return { 2, slot, now, cool }
end
tat = math.max(tat, now, cool + tau) + interval
rcall('HSET', KEYS[1], 'tat', string.format('%.0f', tat), 'cool', string.format('%.0f', cool))
-- The state means nothing once tat and cool are past: let an idle gate vanish.
rcall('PEXPIRE', KEYS[1], math.floor((math.max(tat, cool) - now) / 1000) + 1000)
if slot > now then
  return { 1, slot, now, cool }
end
return { 0, slot, now, cool }
