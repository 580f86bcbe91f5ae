-- wrk script for bench/scale.sh: GET /api/messages/{id} with ids drawn
-- uniformly from 1..MAXID. Pass the bearer token with wrk's -H.
--   wrk ... -H 'Authorization: Bearer T' -s bench/random_get.lua http://127.0.0.1:PORT -- MAXID SEED
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "report.lua")

local nthreads_seen = 0
function setup(thread)
  nthreads_seen = nthreads_seen + 1
  thread:set("tid", nthreads_seen)
end

local maxid = 1
function init(args)
  maxid = tonumber(args[1])
  math.randomseed(tonumber(args[2]) * 1000 + tid)
end

function request()
  return wrk.format("GET", "/api/messages/" .. math.random(maxid))
end
