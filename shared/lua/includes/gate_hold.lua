--[[ include gate_hold: gate_hold(st, now, length, interval, burst, tolerance) starts or
  extends the cooldown in the gate state st (read_state's) to now + length, never
  shortening one, and moves both schedules behind it: every slot handed out afterwards
  starts at or after the cooldown's end, spaced by the pace, and every start at least an
  interval after the one before (no burst right after a cooldown). The caller saves st.
  gate_defer and key_refused hold the gate alike. ]]
local function gate_hold(st, now, length, interval, burst, tolerance)
  st.cooldown_end = math.max(st.cooldown_end, now + length)
  st.next_reservation = math.max(st.next_reservation, st.cooldown_end + (burst - 1) * (interval + tolerance))
  -- Held slots that survive the cooldown (reserved behind it) start an interval apart too.
  st.next_start = math.max(st.next_start, st.cooldown_end + (burst - 1) * interval)
end
