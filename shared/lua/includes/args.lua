--[[ include args: whole_args(indices, min) → nil when every ARGV[i] listed is a whole
  number from min below 2^53, else the error reply to return, before anything is written
  (a script that failed halfway would leave an entry in no set). The value is never echoed. ]]
local function whole_args(indices, min)
  for _, i in ipairs(indices) do
    local n = tonumber(ARGV[i])
    if not n or n ~= n or n < min or n >= 9007199254740992 or n % 1 ~= 0 then
      return redis.error_reply('BADARG ARGV[' .. i .. '] must be a whole number from ' .. min)
    end
  end
  return nil
end
