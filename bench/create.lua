-- wrk script for bench/scale.sh: the "create" workloads. POSTs varied JSON
-- messages (bench/content.lua) to the URL's path, rotating bearer tokens:
-- plain ones (KIND "plain"), ones that mention five accounts ("mention5")
-- or answers to messages 1 to MAXID ("reply").
--   wrk ... -s bench/create.lua http://127.0.0.1:PORT/api/messages -- SEED KIND MAXID TOKEN...
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "report.lua")
local content = dofile(dir .. "content.lua")

local nthreads_seen = 0
function setup(thread)
  nthreads_seen = nthreads_seen + 1
  thread:set("tid", nthreads_seen)
end

-- Requests are built before the run, POOL per thread, and sent in turn:
-- building each one in Lua as it is sent (some 30 random draws and a
-- concatenation) cost wrk about 7 µs of CPU per request on the cores Herald
-- runs on, where the baseline's wrk sends one prebuilt request. POOL
-- distinct bodies per thread keep the content varied; only the words
-- repeat, as they do in any real traffic.
local POOL = 2000
local n, reqs = 0, {}
function init(args)
  content.start(tonumber(args[1]) * 1000 + tid)
  local kind, maxid = args[2], tonumber(args[3])
  local hdrs = {}
  for i = 4, #args do hdrs[#hdrs + 1] = content.headers(args[i]) end
  assert(#hdrs > 0, "create.lua: no tokens")
  for i = 1, POOL do
    reqs[i] = wrk.format("POST", wrk.path, hdrs[i % #hdrs + 1], content.body(kind, maxid))
  end
end

function request()
  n = n % POOL + 1
  return reqs[n]
end
