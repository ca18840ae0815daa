--[[ gate_defer: start or extend the cluster-wide cooldown; never shortens one.
  Every slot handed out afterwards starts at or after the cooldown's end, spaced by the
  pace, and every start at least an interval after the one before (no burst right after a
  cooldown); slots reserved earlier that fall inside it are voided when their holders
  confirm (see gate_acquire).
  Input:
    KEYS[1]  gate state hash (see includes/gate_state.lua)
    ARGV[1]  cooldown length from now, µs (> 0)
    ARGV[2]  interval, µs (> 0)
    ARGV[3]  burst (>= 1)
    ARGV[4]  tolerance, µs (>= 0; as gate_acquire's)
    ARGV[5]  how long an idle state is kept past its last time, ms (> 0)
  Output: { cool, now }  the cooldown's end (possibly an earlier, longer one) and Redis' now, µs
  Errors: CORRUPT, NEWER (see includes/gate_state.lua) ]]
local now = redis_now()
local interval, burst, tolerance = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local st = read_state(KEYS[1], now, interval, burst, tolerance)
st.cool = math.max(st.cool, now + tonumber(ARGV[1]))
st.tat = math.max(st.tat, st.cool + (burst - 1) * (interval + tolerance))
-- Held slots that survive the cooldown (reserved behind it) start an interval apart too.
st.sat = math.max(st.sat, st.cool + (burst - 1) * interval)
save_state(KEYS[1], st, now, tonumber(ARGV[5]))
return { st.cool, now }
