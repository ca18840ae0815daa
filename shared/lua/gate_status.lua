--[[ gate_status: read the gate's state with the clock of the node that holds it; writes nothing.
  Keys:
    K.gate   the gate's state hash (see includes/gate_state.lua)
  Input:
    ARGV[1]  interval, µs   ARGV[2] burst   ARGV[3] tolerance, µs
  Output: { now, next_slot, cooldown_end, fresh, next_reservation, next_start }  µs on
    Redis' clock: the earliest a fresh caller could start (behind reservations, starts and
    the cooldown), the cooldown's end (0 when none was set), 1 when there is no state (a
    first caller waits the fresh quiet; the other fields then show that quiet), and the
    two schedules
  Errors: CORRUPT, NEWER (see includes/gate_state.lua) ]]
--- @include "gate_state"
local interval, burst, tolerance = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local now = redis_now_us()
local st = read_state(now, interval, burst, tolerance)
local next_slot = math.max(now, st.next_reservation - (burst - 1) * (interval + tolerance),
  st.next_start - (burst - 1) * interval, st.cooldown_end)
return { now, next_slot, st.cooldown_end, st.fresh and 1 or 0, st.next_reservation, st.next_start }
