-- wrk script for bench/scale.sh: the "create" workload. POSTs varied JSON
-- messages (bench/content.lua) to the URL's path, rotating bearer tokens.
--   wrk ... -s bench/create.lua http://127.0.0.1:PORT/api/messages -- SEED TOKEN...
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "report.lua")
local content = dofile(dir .. "content.lua")

local nthreads_seen = 0
function setup(thread)
  nthreads_seen = nthreads_seen + 1
  thread:set("tid", nthreads_seen)
end

local n, hdrs = 0, {}
function init(args)
  content.start(tonumber(args[1]) * 1000 + tid)
  for i = 2, #args do hdrs[#hdrs + 1] = content.headers(args[i]) end
  assert(#hdrs > 0, "create.lua: no tokens")
end

function request()
  n = n + 1
  return wrk.format("POST", wrk.path, hdrs[n % #hdrs + 1], content.body())
end
