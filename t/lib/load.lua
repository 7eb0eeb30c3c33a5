--
-- Copyright (C) ngx_oip_module authors
--
-- wrk script of the load test (t/load/test_load.py): cycles
-- through a fixed set of requests and checks every answer against the
-- exact bytes precomputed by the test.
--
--   OIP_LOAD_DIR=dir wrk -t2 -c2 -d8s -s load.lua http://127.0.0.1:port
--
-- dir/manifest has one case a line, fields separated by tabs:
--
--   kind name path status id ctype ihcl headers body_file answer_file
--
-- kind is "valid" or "hostile"; status, ctype and ihcl are what the
-- answer must carry ("-": no such header); headers are the request's
-- extra headers as "Name: value" joined by "|".  body_file and
-- answer_file (names in dir) hold the request body and the exact body
-- of the answer.  A valid answer must also echo the case's id.
--
-- The request that an answer belongs to is known because each thread
-- has one connection (-c equal to -t): a thread sends a request, then
-- reads its answer, then sends the next.  An answer missing in between
-- (a connection that broke) is counted as lost.
--
-- OIP_LOAD_MAX: each thread stops after this many answers (0: no cap).
--
-- done() prints one line "OIP-LOAD key=value ...", one line
-- "OIP-LOAD-CASE name=count ..." and up to 5 "OIP-LOAD-BAD ..." lines.

local dir = os.getenv("OIP_LOAD_DIR")
local max = tonumber(os.getenv("OIP_LOAD_MAX") or "0") or 0

local COUNTERS = {"sent", "got", "valid_ok", "valid_wrong", "valid_non2xx",
                  "hostile_ok", "hostile_wrong", "lost"}

-- main state: keep the threads for done()

local threads = {}

function setup(thread)
   threads[#threads + 1] = thread
   thread:set("tid", #threads)
end

-- thread state

local cases = {}
local pos = 0
local pending = nil
local calls = 0

for _, name in ipairs(COUNTERS) do
   _G[name] = 0
end
case_got = {}
bad = {}

local function slurp(name)
   local f = assert(io.open(dir .. "/" .. name, "rb"))
   local s = f:read("*a")
   f:close()
   return s
end

local function split(s, sep)
   local out = {}
   for field in (s .. sep):gmatch("(.-)" .. sep) do
      out[#out + 1] = field
   end
   return out
end

function init(args)
   assert(dir, "OIP_LOAD_DIR is not set")
   for line in io.lines(dir .. "/manifest") do
      local f = split(line, "\t")
      local c = {kind = f[1], name = f[2], path = f[3],
                 status = tonumber(f[4]), id = f[5], ctype = f[6],
                 ihcl = f[7], answer = slurp(f[10])}
      local headers = {}
      if f[8] ~= "-" then
         for _, h in ipairs(split(f[8], "|")) do
            local k, v = h:match("^([^:]+): (.*)$")
            headers[k] = v
         end
      end
      c.request = wrk.format("POST", c.path, headers, slurp(f[9]))
      cases[#cases + 1] = c
      case_got[c.name] = 0
   end
   -- the threads start at different places of the cycle
   pos = ((tid or 1) - 1) * 7 % #cases
end

function request()
   calls = calls + 1
   -- wrk calls request() once in the first thread before the run, to
   -- check what it returns: that request is never sent
   local dry = (tid == 1 and calls == 1)
   if pending and not dry then
      lost = lost + 1
   end
   pos = pos % #cases + 1
   local c = cases[pos]
   if not dry then
      pending = c
      sent = sent + 1
   end
   return c.request
end

local function header(headers, name)
   name = name:lower()
   for k, v in pairs(headers) do
      if k:lower() == name then
         return v
      end
   end
   return "-"
end

local function complain(c, status, headers, body, why)
   if #bad < 5 then
      bad[#bad + 1] = string.format("thread=%d case=%s why=%s status=%d "
         .. "ctype=%s ihcl=%s len=%d body=%q", tid or 0, c and c.name or "?",
         why, status, header(headers, "Content-Type"),
         header(headers, "Inference-Header-Content-Length"), #body,
         body:sub(1, 200))
   end
end

function response(status, headers, body)
   got = got + 1
   local c = pending
   pending = nil
   if c == nil then
      valid_wrong = valid_wrong + 1
      complain(c, status, headers, body, "unexpected-answer")
   else
      case_got[c.name] = case_got[c.name] + 1
      local why = nil
      if status ~= c.status then
         why = "status"
      elseif header(headers, "Content-Type") ~= c.ctype then
         why = "content-type"
      elseif header(headers, "Inference-Header-Content-Length") ~= c.ihcl
      then
         why = "ihcl"
      elseif c.kind == "valid" and
             body:sub(1, 400):match('"id":"([^"]*)"') ~= c.id then
         why = "id"
      elseif body ~= c.answer then
         why = "body"
      end
      if c.kind == "valid" then
         if why == nil then
            valid_ok = valid_ok + 1
         elseif status < 200 or status > 299 then
            valid_non2xx = valid_non2xx + 1
         else
            valid_wrong = valid_wrong + 1
         end
      elseif why == nil and body:sub(1, 8) == '{"error"' then
         hostile_ok = hostile_ok + 1
      else
         hostile_wrong = hostile_wrong + 1
         why = why or "not-an-error-body"
      end
      if why then
         complain(c, status, headers, body, why)
      end
   end
   if max > 0 and got >= max then
      wrk.thread:stop()
   end
end

-- main state again

function done(summary, latency, requests)
   local total = {}
   local per_case = {}
   local bads = {}
   for _, name in ipairs(COUNTERS) do
      total[name] = 0
   end
   for _, t in ipairs(threads) do
      for _, name in ipairs(COUNTERS) do
         total[name] = total[name] + (t:get(name) or 0)
      end
      for k, v in pairs(t:get("case_got") or {}) do
         per_case[k] = (per_case[k] or 0) + v
      end
      for _, b in ipairs(t:get("bad") or {}) do
         bads[#bads + 1] = b
      end
   end

   local e = summary.errors
   local out = {string.format("OIP-LOAD requests=%d duration_us=%d "
      .. "bytes=%d err_connect=%d err_read=%d err_write=%d err_timeout=%d "
      .. "latency_p99_us=%d latency_max_us=%d", summary.requests,
      summary.duration, summary.bytes, e.connect, e.read, e.write,
      e.timeout, latency:percentile(99.0), latency.max)}
   for _, name in ipairs(COUNTERS) do
      out[#out + 1] = string.format("%s=%d", name, total[name])
   end
   io.write(table.concat(out, " "), "\n")

   local names = {}
   for k in pairs(per_case) do
      names[#names + 1] = k
   end
   table.sort(names)
   local cs = {"OIP-LOAD-CASE"}
   for _, k in ipairs(names) do
      cs[#cs + 1] = string.format("%s=%d", k, per_case[k])
   end
   io.write(table.concat(cs, " "), "\n")

   for i = 1, math.min(#bads, 5) do
      io.write("OIP-LOAD-BAD ", bads[i], "\n")
   end
end
