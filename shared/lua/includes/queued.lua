--[[ include queued: membership in the queue's sets decides what an id is, never a stored
  field alone. Needs K.waiting, K.ready, K.leased and K.dead.
  is_live(id)   → true when id waits, is due or is leased
  is_queued(id) → true when id is live or a dead letter
  entry_name(id, legacy) → the member name this job's entry lives under: legacy (the name
    the previous release gave it; '' when the same) when only that one is queued, else id ]]
local function is_live(id)
  return redis.call('ZSCORE', K.waiting, id) ~= false or redis.call('ZSCORE', K.ready, id) ~= false
    or redis.call('ZSCORE', K.leased, id) ~= false
end
local function is_queued(id)
  return is_live(id) or redis.call('ZSCORE', K.dead, id) ~= false
end
local function entry_name(id, legacy)
  if legacy ~= '' and not is_queued(id) and is_queued(legacy) then
    return legacy
  end
  return id
end
