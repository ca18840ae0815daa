--[[ gate_release: give back a granted start that was never sent (its caller could not send
  within the grant's validity: a starved CPU, a long pause), so the start does not count.
  Input:
    KEYS[1]  gate state hash (see includes/gate_state.lua)
    ARGV[1]  sat_before and ARGV[2] sat_after, as gate_acquire granted them
    ARGV[3]  epoch of the grant   ARGV[4] the granted slot, µs
    ARGV[5]  interval, µs   ARGV[6] burst   ARGV[7] tolerance, µs
    ARGV[8]  how long an idle state is kept past its last time, ms (> 0)
    ARGV[9]  the grant's moment (its reply's now), µs: only the last grant can be given back,
             and only once
  Output: 1 when the start was given back (and its reservation too, when it is the newest);
    0 when another start has been granted since (or the state is not the one that granted
    it), in which case the unsent start still counts: the next one keeps its full interval
    after it, which is only ever safe.
  Errors: CORRUPT, NEWER (see includes/gate_state.lua) ]]
local now = redis_now()
local interval, burst, tolerance = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local st = read_state(KEYS[1], now, interval, burst, tolerance)
if st.fresh or st.epoch ~= tonumber(ARGV[3]) or st.sat ~= tonumber(ARGV[2])
  or st.g ~= tonumber(ARGV[9]) then
  return 0
end
st.sat = tonumber(ARGV[1])
st.g = 0
local pace = interval + tolerance
if st.tat - (burst - 1) * pace - pace == tonumber(ARGV[4]) then
  st.tat = st.tat - pace
end
save_state(KEYS[1], st, now, tonumber(ARGV[8]))
return 1
