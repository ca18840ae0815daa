--[[ include first: first_failure_or_now(id, now) → the time of id's first failure (ms,
  K.first), indexing it at now when the score is missing (damage), so an entry that goes
  back to the due set keeps an order instead of being dropped. ]]
local function first_failure_or_now(id, now)
  local first = redis.call('ZSCORE', K.first, id)
  if not first then
    first = now
    redis.call('ZADD', K.first, first, id)
  end
  return first
end
