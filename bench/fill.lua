-- wrk script for bench/scale.sh: fill Herald with messages through the API,
-- stopping at a quota so the database ends up with exactly what was asked.
--   wrk ... -s bench/fill.lua http://127.0.0.1:PORT -- QUOTA THREADS SEED TOKEN...
-- QUOTA creates are split between the THREADS wrk threads (pass wrk's -t);
-- requests rotate over the bearer TOKENs. Once a thread has sent its share,
-- its connections idle (an occasional GET /healthz) until wrk's -d ends.
-- done() prints report.lua's RESULT line and then
--   FILL created=N failed=M
-- (201 answers, and answers other than 200/201, summed over threads).
-- wrk calls request() once on its first thread before the run, to check the
-- request parses; that call is not sent, so it is not counted.
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "report.lua")
local content = dofile(dir .. "content.lua")
local report_done = done

local threads, nthreads_seen = {}, 0
function setup(thread)
  nthreads_seen = nthreads_seen + 1
  thread:set("tid", nthreads_seen)
  threads[#threads + 1] = thread
end

created, failed = 0, 0 -- globals: done() reads them with thread:get
local quota, sent, hdrs, dry_run = 0, 0, {}, false

function init(args)
  local total, nthreads, seed = tonumber(args[1]), tonumber(args[2]), tonumber(args[3])
  quota = math.floor(total / nthreads) + ((tid <= total % nthreads) and 1 or 0)
  content.start(seed * 1000 + tid)
  for i = 4, #args do hdrs[#hdrs + 1] = content.headers(args[i]) end
  assert(#hdrs > 0, "fill.lua: no tokens")
  dry_run = (tid == 1)
end

function delay()
  if sent >= quota then return 1000 end
  return 0
end

function request()
  if dry_run then
    dry_run = false
    return wrk.format("POST", "/api/messages", hdrs[1], content.body())
  end
  if sent >= quota then return wrk.format("GET", "/healthz", {}) end
  sent = sent + 1
  return wrk.format("POST", "/api/messages", hdrs[sent % #hdrs + 1], content.body())
end

function response(status)
  if status == 201 then created = created + 1
  elseif status ~= 200 then failed = failed + 1 end
end

done = function(summary, latency, requests)
  report_done(summary, latency, requests)
  local c, f = 0, 0
  for _, t in ipairs(threads) do
    c = c + (t:get("created") or 0)
    f = f + (t:get("failed") or 0)
  end
  io.write(string.format("FILL created=%d failed=%d\n", c, f))
end
