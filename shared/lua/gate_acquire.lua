--[[ gate_acquire: reserve a start slot on the rate gate, or confirm one reserved earlier.
  GCRA with reservation: a caller that must wait is handed its own future slot and
  sleeps once, instead of polling. Decided on Redis' clock (TIME), all times in µs.
  Input:
    KEYS[1]  gate state hash; fields tat (theoretical arrival time), cool (cooldown end)
             and epoch (when this state was created: a slot is only honoured by the
             state that issued it, so a deleted, evicted or failed-over key voids it)
    ARGV[1]  interval, µs (> 0)
    ARGV[2]  burst (>= 1)
    ARGV[3]  longest wait the caller accepts, µs (>= 0)
    ARGV[4]  slot reserved earlier and slept until, µs; 0 for a fresh request
    ARGV[5]  tolerance, µs: how late a holder may confirm and still have its slot
    ARGV[6]  epoch the held slot came with; 0 for a fresh request
  Output: { code, slot, now, cool, epoch }
    code 0  go: slot is granted (slot <= now)
    code 1  wait: sleep (slot - now) µs, then call again with ARGV[4] = slot, ARGV[6] = epoch
    code 2  refused: the wait would exceed ARGV[3]; nothing was reserved
  Errors: CORRUPT when tat, cool or epoch is not a number (nothing is granted)
  A held slot is lost, and replaced by a fresh reservation at the back of the queue, when
  a cooldown set after its reservation ends later than it, when its holder confirms more
  than ARGV[5] after it (a late start would crowd the next holder's call), or when the
  state that issued it is gone. ]]
local rcall = redis.call
local t = rcall('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local max_wait = tonumber(ARGV[3])
local held = tonumber(ARGV[4])
local tolerance = tonumber(ARGV[5])
local state = rcall('HMGET', KEYS[1], 'tat', 'cool', 'epoch')
local tat, cool, epoch = tonumber(state[1]), tonumber(state[2]), tonumber(state[3])
if (state[1] and not tat) or (state[2] and not cool) or (state[3] and not epoch) then
  return redis.error_reply('CORRUPT gate state in ' .. KEYS[1] .. ': tat, cool and epoch must be numbers')
end
tat, cool, epoch = tat or 0, cool or 0, epoch or now

if held > 0 and epoch == tonumber(ARGV[6]) and held >= cool then
  if held > now then
    if held - now > max_wait then
      return { 2, held, now, cool, epoch }
    end
    return { 1, held, now, cool, epoch }
  end
  if now - held <= tolerance then
    return { 0, held, now, cool, epoch }
  end
end

local tau = (burst - 1) * interval
local slot = math.max(now, tat - tau, cool)
if slot - now > max_wait then
  return { 2, slot, now, cool, epoch }
end
tat = math.max(tat, now, cool + tau) + interval
rcall('HSET', KEYS[1], 'tat', string.format('%.0f', tat), 'cool', string.format('%.0f', cool),
  'epoch', string.format('%.0f', epoch))
-- The state means nothing once tat and cool are past: let an idle gate vanish.
rcall('PEXPIRE', KEYS[1], math.floor((math.max(tat, cool) - now) / 1000) + 1000)
if slot > now then
  return { 1, slot, now, cool, epoch }
end
return { 0, slot, now, cool, epoch }
