--[[ gate_status: read the gate's state with the clock of the node that holds it; writes nothing.
  Input:
    KEYS[1]  gate state hash (see includes/gate_state.lua)
    ARGV[1]  interval, µs   ARGV[2] burst   ARGV[3] tolerance, µs
  Output: { now, next_start, cool, fresh, tat, sat }  µs on Redis' clock: the earliest a
    fresh caller could start (behind reservations, starts and the cooldown), the cooldown's
    end (0 when none was set), 1 when there is no state (a first caller waits the fresh
    quiet; the other fields then show that quiet), and the two schedules
  Errors: CORRUPT, NEWER (see includes/gate_state.lua) ]]
local now = redis_now()
local interval, burst, tolerance = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local st = read_state(KEYS[1], now, interval, burst, tolerance)
local next_start = math.max(now, st.tat - (burst - 1) * (interval + tolerance),
  st.sat - (burst - 1) * interval, st.cool)
return { now, next_start, st.cool, st.fresh and 1 or 0, st.tat, st.sat }
