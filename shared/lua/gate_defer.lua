--[[ gate_defer: start or extend the cluster-wide cooldown; never shortens one.
  Every slot handed out afterwards starts at or after the cooldown's end, spaced by the
  pace, and every start at least an interval after the one before (no burst right after a
  cooldown); slots reserved earlier that fall inside it are voided when their holders
  confirm (see gate_acquire).
  Keys:
    K.gate   the gate's state hash (see includes/gate_state.lua)
  Input:
    ARGV[1]  cooldown length from now, µs (> 0)
    ARGV[2]  interval, µs (> 0)
    ARGV[3]  burst (>= 1)
    ARGV[4]  tolerance, µs (>= 0; as gate_acquire's)
    ARGV[5]  how long an idle state is kept past its last time, ms (> 0)
  Output: { cooldown_end, now }  the cooldown's end (possibly an earlier, longer one) and
    Redis' now, µs
  Errors: CORRUPT, NEWER (see includes/gate_state.lua) ]]
--- @include "gate_state"
--- @include "gate_hold"
local length, interval, burst = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local tolerance, idle_ms = tonumber(ARGV[4]), tonumber(ARGV[5])
local now = redis_now_us()
local st = read_state(now, interval, burst, tolerance)
gate_hold(st, now, length, interval, burst, tolerance)
save_state(st, now, idle_ms)
return { st.cooldown_end, now }
