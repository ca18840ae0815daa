--[[ gate_adopt: take over the schedule and cooldown of another gate state, the one the
  release before kept per environment, so that a roll to the per-key gate keeps the
  spacing and the cooldown the old state promised. Only ever moves times later.
  Input:
    KEYS[1]  gate state hash (see includes/gate_state.lua)
    ARGV[1]  the other state's tat, ARGV[2] its sat, ARGV[3] its cool, µs (0 = none); as
             gate_status read them there, already in this format
    ARGV[4]  interval, µs   ARGV[5] burst   ARGV[6] tolerance, µs
    ARGV[7]  how long an idle state is kept past its last time, ms (> 0)
  Output: 1 when something was taken over, 0 when the other state holds nothing in the future
  Errors: CORRUPT, NEWER (see includes/gate_state.lua) ]]
local now = redis_now()
local tat, sat, cool = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if math.max(tat, sat, cool) <= now then
  return 0
end
local st = read_state(KEYS[1], now, tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]))
st.tat, st.sat, st.cool = math.max(st.tat, tat), math.max(st.sat, sat), math.max(st.cool, cool)
save_state(KEYS[1], st, now, tonumber(ARGV[7]))
return 1
