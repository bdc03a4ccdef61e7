-- wrk -s: each request asks for one of 1,000 subjects, in turn (normal traffic of many clients).
-- The page is limit.php, or RL_E2E_PAGE's (bench/e2e/run --redis: the peer's).
local n = 0
local page = os.getenv("RL_E2E_PAGE") or "/limit.php"
request = function()
  n = n % 1000 + 1
  return wrk.format("GET", page .. "?s=client-" .. n .. "&limit=1000000000&per=1")
end
