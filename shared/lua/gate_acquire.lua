--[[ gate_acquire: reserve a start slot on the rate gate, or confirm one reserved earlier.
  GCRA with reservation: a caller that must wait is handed its own future slot and
  sleeps once, instead of polling. Decided on Redis' clock (TIME), all times in µs.
  Two schedules live in the state: tat paces the reservations at the interval, and sat
  paces the starts that really happened at interval − tolerance, so that no two calls
  ever start closer than that, whoever is late.
  Input:
    KEYS[1]  gate state hash; fields tat (theoretical arrival time of the next
             reservation), sat (the same for starts), cool (cooldown end) and epoch (when
             this state was created: a slot is only honoured by the state that issued it,
             so a deleted, evicted or failed-over key voids it)
    ARGV[1]  interval, µs (> 0)
    ARGV[2]  burst (>= 1)
    ARGV[3]  longest wait the caller accepts, µs (>= 0)
    ARGV[4]  slot reserved earlier and slept until, µs; 0 for a fresh request
    ARGV[5]  tolerance, µs (< ARGV[1]): how far below the interval two starts may come
    ARGV[6]  epoch the held slot came with; 0 for a fresh request
  Output: { code, slot, now, cool, epoch }
    code 0  go: slot is granted (slot <= now)
    code 1  wait: sleep (slot - now) µs, then call again with ARGV[4] = slot, ARGV[6] = epoch
    code 2  refused: the wait would exceed ARGV[3]; nothing new was reserved (a held slot
            is given up, and stays unused)
  Errors: CORRUPT when tat, sat, cool or epoch is not a number (nothing is granted)
  Confirming a held slot (burst 1; with a larger burst, "a call" reads "burst calls"):
    - before it: wait for it again;
    - at or after it, with no call started within interval − tolerance: go, however late
      (the slot would otherwise stay idle); the next holder is held back by what this one
      overran, and the overrun shrinks by the tolerance with each slot after it;
    - held back by a call started within interval − tolerance: when that call started
      before this slot (the one before overran) or this holder is on time (within the
      tolerance), the slot moves back just far enough and the caller waits; when it
      started at or after this slot while this holder slept past it, a fresh reservation
      at the back.
  A held slot is void, and replaced by a fresh reservation at the back, when a cooldown
  set after its reservation ends later than it, or when the state that issued it is gone
  (deleted, evicted, failed over, or expired about a second after its last slot). ]]
local rcall = redis.call
local t = rcall('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local max_wait = tonumber(ARGV[3])
local held = tonumber(ARGV[4])
local tolerance = tonumber(ARGV[5])
local state = rcall('HMGET', KEYS[1], 'tat', 'cool', 'epoch', 'sat')
local tat, cool, epoch, sat = tonumber(state[1]), tonumber(state[2]), tonumber(state[3]), tonumber(state[4])
if (state[1] and not tat) or (state[2] and not cool) or (state[3] and not epoch) or (state[4] and not sat) then
  return redis.error_reply('CORRUPT gate state in ' .. KEYS[1] .. ': tat, sat, cool and epoch must be numbers')
end
tat, cool, epoch, sat = tat or 0, cool or 0, epoch or now, sat or 0

local tau = (burst - 1) * interval
local gap = interval - tolerance
-- The first moment a call may start: behind the cooldown and the last starts.
local earliest = math.max(sat - (burst - 1) * gap, cool)

local function save()
  rcall('HSET', KEYS[1], 'tat', string.format('%.0f', tat), 'sat', string.format('%.0f', sat),
    'cool', string.format('%.0f', cool), 'epoch', string.format('%.0f', epoch))
  -- The state means nothing once tat, sat and cool are past: let an idle gate vanish.
  rcall('PEXPIRE', KEYS[1], math.floor((math.max(tat, sat, cool) - now) / 1000) + 1000)
end

local function go(slot)
  sat = math.max(sat, now) + gap
  save()
  return { 0, slot, now, cool, epoch }
end

if held > 0 and epoch == tonumber(ARGV[6]) and held >= cool then
  if held > now then
    if held - now > max_wait then
      return { 2, held, now, cool, epoch }
    end
    return { 1, held, now, cool, epoch }
  end
  if now >= earliest then
    return go(held)
  end
  -- sat - gap is the last start (or later, with a burst).
  if now - held <= tolerance or sat - gap < held then
    if earliest - now > max_wait then
      return { 2, earliest, now, cool, epoch }
    end
    return { 1, earliest, now, cool, epoch }
  end
end

local paced = math.max(now, tat - tau, cool)
local slot = math.max(paced, earliest)
if slot - now > max_wait then
  return { 2, slot, now, cool, epoch }
end
tat = math.max(tat, now, cool + tau) + interval
if slot > paced then
  -- Held back by a late start, not by the reservations: the next one comes an interval
  -- after this slot, with no burst, as after a cooldown.
  tat = math.max(tat, slot + tau + interval)
end
if slot > now then
  save()
  return { 1, slot, now, cool, epoch }
end
return go(slot)
