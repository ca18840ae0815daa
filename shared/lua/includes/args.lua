--[[ include args: whole_args(indices, min) → nil when every ARGV[i] listed is a whole
  number from min below 2^53, written in digits as Redis and the callers write numbers
  (no sign, exponent, hex, spaces or leading zeros), else the error reply to return, before
  anything is written (a script that failed halfway would leave its state half changed).
  The value is never echoed. ]]
local function whole_args(indices, min)
  for _, i in ipairs(indices) do
    local raw = ARGV[i]
    local n = raw and #raw <= 16 and string.match(raw, '^%d+$') and (raw == '0' or string.sub(raw, 1, 1) ~= '0')
      and tonumber(raw)
    if not n or n < min or n >= 9007199254740992 then
      return redis.error_reply('BADARG ARGV[' .. i .. '] must be a whole number from ' .. min)
    end
  end
  return nil
end
