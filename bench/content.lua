-- Message bodies for bench/fill.lua and bench/create.lua (loaded with
-- dofile; returns a table). Content is 20-40 words from a fixed vocabulary:
--   COMMON1 ("apple")  in about 30% of messages,
--   COMMON2 ("river")  in about 20% (so both together: about 6%),
--   RARE    ("zephyr") in 1 message in 10,000 (counted, not drawn, so
--                      100,000 messages hold 10 of them, give or take one),
-- and filler words drawn, skewed towards the first ones, from 2,000
-- made-up three-syllable words that cannot collide with those three.
-- Randomness is math.random, seeded by M.start, so the content is
-- reproducible. Only ASCII letters and spaces: no JSON escaping.
local M = {
  COMMON1 = "apple", COMMON1_P = 0.30,
  COMMON2 = "river", COMMON2_P = 0.20,
  RARE = "zephyr", RARE_EVERY = 10000,
}

local syl = { "ba", "ko", "mi", "ru", "te", "sa", "no", "li",
              "du", "fe", "ga", "po", "zi", "ve", "ha", "jo" }
local vocab = {}
for i = 0, 1999 do
  local k = (i * 7919) % 4096 -- a fixed permutation of the 4,096 words
  local w = syl[k % 16 + 1] .. syl[math.floor(k / 16) % 16 + 1] .. syl[math.floor(k / 256) + 1]
  assert(w ~= M.COMMON1 and w ~= M.COMMON2 and w ~= M.RARE)
  vocab[#vocab + 1] = w
end
M.vocab = vocab

local made, phase = 0, 0

-- start seeds math.random and picks where in each run of RARE_EVERY
-- messages the rare word falls.
function M.start(seed)
  math.randomseed(seed)
  phase = math.random(0, M.RARE_EVERY - 1)
  made = 0
end

local function insert(words, w)
  table.insert(words, math.random(#words + 1), w)
end

-- text returns one message's words.
function M.text()
  local n = math.random(20, 37)
  local words = {}
  for i = 1, n do
    words[i] = vocab[math.floor(#vocab * math.random() ^ 1.5) + 1]
  end
  if math.random() < M.COMMON1_P then insert(words, M.COMMON1) end
  if math.random() < M.COMMON2_P then insert(words, M.COMMON2) end
  made = made + 1
  if (made + phase) % M.RARE_EVERY == 0 then insert(words, M.RARE) end
  return table.concat(words, " ")
end

-- body returns one POST /api/messages JSON body. With kind "mention5"
-- the content names five of the bench's accounts (user2 to user6) with
-- @handle; with "reply" it answers a message drawn from 1 to maxid.
function M.body(kind, maxid)
  if kind == "mention5" then
    return '{"content":"@user2 @user3 @user4 @user5 @user6 ' .. M.text() .. '"}'
  elseif kind == "reply" then
    return '{"content":"' .. M.text() .. '","replyTo":' .. math.random(1, maxid) .. '}'
  end
  return '{"content":"' .. M.text() .. '"}'
end

-- headers returns the request headers for one bearer token.
function M.headers(token)
  return { ["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. token }
end

return M
