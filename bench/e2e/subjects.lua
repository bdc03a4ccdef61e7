-- wrk -s: each request asks for one of 1,000 subjects, in turn (normal traffic of many clients).
local n = 0
request = function()
  n = n % 1000 + 1
  return wrk.format("GET", "/limit.php?s=client-" .. n .. "&limit=1000000000&per=1")
end
