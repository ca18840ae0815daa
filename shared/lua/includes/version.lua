--[[ include version: the queue state's format, in field v of the meta hash.
  Absent: format 1, as the first release wrote it (it kept no version); read as it is.
  2: identities over 96 bytes are named by a prefix and a digest; a name of format 1 is
  still found (the caller passes it), and histories may carry a 'revived' note.
  queue_format_refusal(meta) → nil when this script can read the state, else the error
  reply to return: a newer format (an instance of a newer release wrote it), a v that
  is not a version, or a meta key that is not a hash. queue_format_mark(meta) records the
  format after a change. ]]
local QUEUE_FORMAT = 2
local function queue_format_refusal(meta)
  local kind = redis.call('TYPE', meta).ok
  if kind ~= 'hash' and kind ~= 'none' then
    return redis.error_reply('CORRUPT ' .. meta .. ' is a ' .. kind .. ', not a hash')
  end
  local v = redis.call('HGET', meta, 'v')
  if not v then
    return nil
  end
  local n = tonumber(v)
  if not n or n < 1 or n % 1 ~= 0 then
    return redis.error_reply('CORRUPT ' .. meta .. ' field v is not a format version')
  end
  if n > QUEUE_FORMAT then
    return redis.error_reply('NEWER queue state ' .. meta .. ': version ' .. string.format('%d', n)
      .. ', this release understands up to ' .. QUEUE_FORMAT .. '; upgrade every instance')
  end
  return nil
end
local function queue_format_mark(meta)
  redis.call('HSET', meta, 'v', QUEUE_FORMAT)
end
