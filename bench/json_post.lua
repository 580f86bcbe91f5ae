-- wrk script for bench/scale.sh: POST one fixed JSON body to the URL, e.g.
-- the "login" workload.
--   wrk ... -s bench/json_post.lua http://127.0.0.1:PORT/api/login -- '{"username":...}'
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "report.lua")

function init(args)
  wrk.method = "POST"
  wrk.body = args[1]
  wrk.headers["Content-Type"] = "application/json"
end
