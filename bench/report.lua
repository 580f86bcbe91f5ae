-- wrk done() hook: one machine-readable line per run (requests = answers
-- that finished within the run; those still in flight at the end are lost).
done = function(summary, latency, requests)
  local secs = summary.duration / 1e6
  io.write(string.format("RESULT rps=%.1f p50_ms=%.3f p99_ms=%.3f errors=%d non2xx=%d requests=%d\n",
    summary.requests / secs, latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.errors.status, summary.requests))
end
