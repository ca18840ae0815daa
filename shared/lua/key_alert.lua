--[[ key_alert: the key-health circuit's alert, delivered at least once: taken on a lease
  for delivery, confirmed when delivered, or owed again at once after a delivery that
  failed. An alert taken and never confirmed (the drainer died, or this reply was lost) is
  offered again when its lease ends.
  Keys:
    K.health   the circuit's hash (see includes/health_state.lua)
    K.alerted  the kind of the last opening whose alert was delivered (see key_refused)
  Input:
    ARGV[1]  take, delivered or owe
    take:      ARGV[2] the lease, ms (whole, 1 to two days)
    delivered: ARGV[2] opened_ms of the opening whose alert was taken (whole, >= 0);
               ARGV[3] its reason (1-40 of a-z and _); ARGV[4] how long the marker is
               kept, ms (whole, >= 1)
    owe:       ARGV[2] opened_ms of the opening whose alert was taken (whole, >= 0)
  Output: take: { reason, opened_ms, last_ms, refusals, last_reason } (numbers in digits)
            when the alert was owed and not leased, else {};
          delivered: 1 that opening is open (its alert is no longer owed), 0 it is not
            (closed, or another opening since); either way K.alerted records the reason;
          owe: 1 owed again; 0 no such opening is open
  Errors: BADARG, CORRUPT, NEWER (see includes/health_state.lua); nothing is written. ]]
--- @include "clock"
--- @include "health_state"
--- @include "args"
local mode = ARGV[1]
if mode ~= 'take' and mode ~= 'owe' and mode ~= 'delivered' then
  return redis.error_reply('BADARG ARGV[1] must be take, delivered or owe')
end
local refusal
if mode == 'take' then
  refusal = whole_args({ 2 }, 1)
  if not refusal and tonumber(ARGV[2]) > HEALTH_HORIZON_MS then
    refusal = redis.error_reply('BADARG ARGV[2] must be a lease of at most two days')
  end
elseif mode == 'owe' then
  refusal = whole_args({ 2 }, 0)
else
  refusal = whole_args({ 2 }, 0) or whole_args({ 4 }, 1)
  if not refusal and not health_kind(ARGV[3]) then
    refusal = redis.error_reply('BADARG ARGV[3] must be 1-40 of a-z and _')
  end
end
if refusal then
  return refusal
end
local alerted_kind = redis.call('TYPE', K.alerted).ok
if alerted_kind ~= 'string' and alerted_kind ~= 'none' then
  return redis.error_reply('CORRUPT ' .. K.alerted .. ' is a ' .. alerted_kind .. ', not a string')
end
local now = math.floor(redis_now_us() / 1000)
local h = read_health(now)
local this_opening = h and h.opened_ms == tonumber(ARGV[2])
if mode == 'owe' then
  if not this_opening then
    return 0
  end
  redis.call('HSET', K.health, 'alert', 0)
  return 1
end
if mode == 'delivered' then
  redis.call('SET', K.alerted, ARGV[3], 'PX', ARGV[4])
  if not this_opening then
    return 0
  end
  redis.call('HDEL', K.health, 'alert')
  return 1
end
if not h or not h.alert or h.alert > now then
  return {}
end
redis.call('HSET', K.health, 'alert', health_digits(now + tonumber(ARGV[2])))
return { h.reason, health_digits(h.opened_ms), health_digits(h.last_ms), health_digits(h.refusals),
  h.last_reason }
