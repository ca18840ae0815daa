--[[ gate_adopt: take over the schedule and cooldown of another gate state, the one the
  release before kept per environment, so that a roll to the per-key gate keeps the
  spacing and the cooldown the old state promised. Only ever moves times later.
  Keys:
    K.gate   the gate's state hash (see includes/gate_state.lua)
  Input:
    ARGV[1]  the other state's next_reservation, ARGV[2] its next_start, ARGV[3] its
             cooldown_end, µs (0 = none); as gate_status read them there, already in this
             format
    ARGV[4]  interval, µs   ARGV[5] burst   ARGV[6] tolerance, µs
    ARGV[7]  how long an idle state is kept past its last time, ms (> 0)
  Output: 1 when something was taken over, 0 when the other state holds nothing in the future
  Errors: CORRUPT, NEWER (see includes/gate_state.lua) ]]
--- @include "gate_state"
local next_reservation, next_start = tonumber(ARGV[1]), tonumber(ARGV[2])
local cooldown_end = tonumber(ARGV[3])
local interval, burst, tolerance = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local idle_ms = tonumber(ARGV[7])
local now = redis_now_us()
if math.max(next_reservation, next_start, cooldown_end) <= now then
  return 0
end
local st = read_state(now, interval, burst, tolerance)
st.next_reservation = math.max(st.next_reservation, next_reservation)
st.next_start = math.max(st.next_start, next_start)
st.cooldown_end = math.max(st.cooldown_end, cooldown_end)
save_state(st, now, idle_ms)
return 1
