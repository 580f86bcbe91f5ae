-- wrk script: POST a small JSON message per request.
dofile("bench/report.lua")
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local n = 0
request = function()
  n = n + 1
  return wrk.format(nil, nil, nil, '{"content":"load test message ' .. n .. ' with some words to index"}')
end
