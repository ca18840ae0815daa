--[[ gate_release: give back a granted start that was never sent (its caller could not send
  within the grant's validity: a starved CPU, a long pause), so the start does not count.
  Keys:
    K.gate    the gate's state hash (see includes/gate_state.lua)
    K.health  the key-health circuit beside it: a probe given back is no longer in flight
              (even when its start still counts), so the next start probes at once
  Input:
    ARGV[1]  next_start_before and ARGV[2] next_start_after, as gate_acquire granted them
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
--- @include "gate_state"
local next_start_before, next_start_after = tonumber(ARGV[1]), tonumber(ARGV[2])
local epoch, slot = tonumber(ARGV[3]), tonumber(ARGV[4])
local interval, burst, tolerance = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local idle_ms, granted_at = tonumber(ARGV[8]), tonumber(ARGV[9])
local now = redis_now_us()
local st = read_state(now, interval, burst, tolerance)
local still_the_last_grant = not st.fresh and st.epoch == epoch and st.next_start == next_start_after
  and st.last_grant == granted_at
-- A probe given back is no longer in flight, whether or not its start can be given back.
if redis.call('TYPE', K.health).ok == 'hash' and redis.call('HGET', K.health, 'probe_at') == string.format('%.0f', granted_at) then
  redis.call('HDEL', K.health, 'probe_until', 'probe_at')
end
if not still_the_last_grant then
  return 0
end
st.next_start = next_start_before
st.last_grant = 0
local pace = interval + tolerance
local newest_reservation = st.next_reservation - (burst - 1) * pace - pace
if slot == newest_reservation then
  st.next_reservation = st.next_reservation - pace
end
save_state(st, now, idle_ms)
return 1
