--[[ include queue_checks: queue_refusal(whole, min) → nil when a changing queue script may
  go on, else the error reply it returns before its first write (Redis keeps a script's
  writes up to a failing command, so damage met half-way would leave an entry in no set).
  In order: the state's format (includes/version.lua), the type of every key the script
  binds, in the queue's key order (jobs, first, count, errors, waiting, ready, leased,
  lease, dead, alerts, seq, meta; includes/shape.lua), and every ARGV[i] for i in `whole`
  a whole number from `min` (includes/args.lua). The first refusal is returned. ]]
--- @include "version"
--- @include "shape"
--- @include "args"
local function queue_refusal(whole, min)
  return queue_format_refusal(K.meta) or queue_shape_refusal() or whole_args(whole, min)
end
